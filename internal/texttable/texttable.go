package texttable

import (
	"io"
	"strings"
	"unicode/utf8"
)

// gap is the space between two columns.
const gap = "  "

// Write writes rows to w, one line each: every cell but a row's last is
// padded with spaces to the widest cell of its column (in runes) and
// followed by two spaces. Rows may differ in length; a column is as wide as
// its widest cell among the rows that have a cell after it. Cells should
// hold no line breaks: the caller folds them, as it knows how its text
// reads on one line. The table is written with one Write.
func Write(w io.Writer, rows [][]string) error {
	widths := columnWidths(rows)
	var b strings.Builder
	for _, row := range rows {
		for i, cell := range row {
			b.WriteString(cell)
			if i == len(row)-1 {
				break
			}
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)))
			b.WriteString(gap)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// columnWidths is the widest padded cell of each column, in runes.
func columnWidths(rows [][]string) []int {
	var widths []int
	for _, row := range rows {
		for i := range len(row) - 1 {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(row[i]))
		}
	}
	return widths
}

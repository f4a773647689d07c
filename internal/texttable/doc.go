// Package texttable writes the aligned text tables walrelay prints for
// people: `walrelay check`'s results, `walrelay status`'s key and value
// lines and `walrelay dlq list`'s rows. One writer, so that every table
// aligns the same way: columns padded to their widest cell, counted in
// runes as a terminal shows them, two spaces apart, and the last cell of a
// row never padded, so that no line ends in spaces a long last column
// would have put there.
//
// Internal: walrelay's own, for the packages that render a verb's output.
package texttable

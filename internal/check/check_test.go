package check

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestReportFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Report
		want bool
	}{
		{"empty", nil, false},
		{"all ok", Report{Pass("a", "x"), Pass("b", "y")}, false},
		{"warnings only", Report{Pass("a", "x"), Warning("b", "y", "do z")}, false},
		{"one fail", Report{Pass("a", "x"), Warning("b", "y", "do z"), Failure("c", "w", "do v")}, true},
		{"only fail", Report{Failure("c", "w", "do v")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Failed(); got != tc.want {
				t.Errorf("Failed(): got %v; want %v", got, tc.want)
			}
		})
	}
}

func TestReportErr(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Pass("a", "x"), Warning("b", "y", "do z")}, ""},
		{Report{Pass("a", "x"), Failure("c", "w", "do v")}, "1 check failed"},
		{Report{Failure("c", "w", "do v"), Warning("b", "y", "do z"), Failure("d", "w", "do v")}, "2 checks failed"},
	} {
		err := tc.r.Err()
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("Err() of %d results: got %v; want %q", len(tc.r), err, tc.want)
		}
	}
}

func TestStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{{OK, "ok"}, {Warn, "warn"}, {Fail, "fail"}, {Status(7), "status(7)"}, {Status(-1), "status(-1)"}} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("Status(%d).String(): got %q; want %q", int(tc.s), got, tc.want)
		}
	}
}

func TestWriteText(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Report
		want string
	}{
		{"empty", nil, "0 ok, 0 warn, 0 fail\n"},
		{
			"aligned, fix only when given",
			Report{
				Pass("wal_level", "logical"),
				Warning("max_slot_wal_keep_size", "-1 (unlimited)", "Set it."),
				Failure("slot", "missing", "Run `walrelay init`."),
			},
			"ok    wal_level               logical\n" +
				"warn  max_slot_wal_keep_size  -1 (unlimited)  fix: Set it.\n" +
				"fail  slot                    missing  fix: Run `walrelay init`.\n" +
				"1 ok, 1 warn, 1 fail\n",
		},
		{
			"names aligned by runes, not bytes",
			Report{Pass("topic ördérs", "present"), Pass("topic o", "present")},
			"ok    topic ördérs  present\nok    topic o       present\n2 ok, 0 warn, 0 fail\n",
		},
		{
			"line breaks folded",
			Report{Failure("postgres reachable", "dial:\nrefused\r\n", "Start\tit.")},
			"fail  postgres reachable  dial: refused  fix: Start it.\n0 ok, 0 warn, 1 fail\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.r.WriteText(&b); err != nil {
				t.Fatalf("WriteText: got %v; want nil", err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("WriteText:\ngot\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestWriteJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Report
		want string
	}{
		{"empty", nil, `{"checks":[],"ok":0,"warn":0,"fail":0,"failed":false}`},
		{
			"statuses as words, fix omitted when empty",
			Report{Pass("a", "x"), Warning("b", "y", "do z"), Failure("c", "w", "do v")},
			`{"checks":[{"name":"a","status":"ok","found":"x"},{"name":"b","status":"warn","found":"y","fix":"do z"},` +
				`{"name":"c","status":"fail","found":"w","fix":"do v"}],"ok":1,"warn":1,"fail":1,"failed":true}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.r.WriteJSON(&b); err != nil {
				t.Fatalf("WriteJSON: got %v; want nil", err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, b.Bytes()); err != nil {
				t.Fatalf("WriteJSON wrote invalid JSON %q: %v", b.String(), err)
			}
			if got := compact.String(); got != tc.want {
				t.Errorf("WriteJSON:\ngot  %s\nwant %s", got, tc.want)
			}
			var back struct{ Checks Report }
			if err := json.Unmarshal(b.Bytes(), &back); err != nil {
				t.Fatalf("read back: got %v; want nil", err)
			}
			if len(back.Checks) != len(tc.r) {
				t.Fatalf("read back: got %d checks; want %d", len(back.Checks), len(tc.r))
			}
			for i := range tc.r {
				if back.Checks[i] != tc.r[i] {
					t.Errorf("read back check %d: got %+v; want %+v", i, back.Checks[i], tc.r[i])
				}
			}
		})
	}
}

func TestStatusUnmarshalRejectsUnknown(t *testing.T) {
	var s Status
	if err := s.UnmarshalText([]byte("fine")); err == nil {
		t.Errorf("UnmarshalText(%q): got nil; want an error", "fine")
	}
	if _, err := Status(9).MarshalText(); err == nil {
		t.Errorf("MarshalText of Status(9): got nil; want an error")
	}
}

package recall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ompsync/ompsync/restore"
)

// A history past the budget keeps its newest copies, whichever machine
// holds them (the copies come by machine, then generation), and says once
// that it left the others out.
func TestKeepNewest(t *testing.T) {
	h := &restore.SessionHistory{ID: "019b0000-0000-7000-8000-000000000000"}
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, m := range []struct {
		name  string
		first time.Duration
	}{{"laptop", time.Minute}, {"desktop", 0}} {
		for i := range 150 {
			h.Copies = append(h.Copies, restore.Copy{Machine: m.name, Generation: fmt.Sprintf("g%03d", i),
				Started: start.Add(m.first + time.Duration(2*i)*time.Minute), Title: strings.Repeat("t", 200)})
		}
	}
	if !keepNewest(h, Budget-1024) {
		t.Fatal("a history of 300 long copies was not cut")
	}
	if b, _ := json.Marshal(h); len(b) >= Budget-1024 {
		t.Errorf("cut history is %d bytes, want under %d", len(b), Budget-1024)
	}
	kept := map[string]int{}
	oldest := h.Copies[0].Started
	for _, c := range h.Copies {
		kept[c.Machine]++
		if oldest.After(c.Started) {
			oldest = c.Started
		}
	}
	// Every copy newer than the oldest kept one is kept: 300 copies, one a
	// minute, from start on.
	if want := 300 - int(oldest.Sub(start)/time.Minute); len(h.Copies) != want || kept["laptop"] == 0 || kept["desktop"] == 0 {
		t.Errorf("kept %d copies (%v) from %v on, want the newest %d of both machines", len(h.Copies), kept, oldest, want)
	}

	small := &restore.SessionHistory{Copies: h.Copies[:2]}
	if keepNewest(small, Budget-1024) || len(small.Copies) != 2 {
		t.Errorf("a short history was cut to %d copies", len(small.Copies))
	}
	one := &restore.SessionHistory{Copies: []restore.Copy{{Title: strings.Repeat("t", 2*Budget)}}}
	if keepNewest(one, Budget-1024) || len(one.Copies) != 1 {
		t.Errorf("a history's one copy was dropped")
	}
}

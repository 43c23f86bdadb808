package recall

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/restore"
)

// A history past the budget keeps its last copies, and says once that it
// left the others out.
func TestKeepNewest(t *testing.T) {
	h := &restore.SessionHistory{ID: "019b0000-0000-7000-8000-000000000000"}
	for i := range 300 {
		h.Copies = append(h.Copies, restore.Copy{Machine: "laptop", Generation: fmt.Sprintf("g%03d", i), Title: strings.Repeat("t", 200)})
	}
	last := h.Copies[len(h.Copies)-1]
	if !keepNewest(h, Budget-1024) {
		t.Fatal("a history of 300 long copies was not cut")
	}
	if b, _ := json.Marshal(h); len(b) >= Budget-1024 {
		t.Errorf("cut history is %d bytes, want under %d", len(b), Budget-1024)
	}
	if got := h.Copies[len(h.Copies)-1]; got.Generation != last.Generation || len(h.Copies) < 2 {
		t.Errorf("kept %d copies ending with %s, want the newest, %s", len(h.Copies), got.Generation, last.Generation)
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

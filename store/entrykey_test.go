package store

import "testing"

// A rewrite that prunes an entry's content keeps its key; another entry,
// or a line that is no entry, has another or none.
func TestEntryKey(t *testing.T) {
	cases := []struct {
		st        *Store
		a, pruned string // one entry, and the same entry rewritten
		other     string // another entry
	}{
		{OMP(), `{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"user","content":"long"}}`,
			`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"user","content":"[pruned]"}}`,
			`{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-02T03:04:06.000Z","message":{"role":"user","content":"long"}}`},
		{Pi(), `{"type":"message","id":"x","timestamp":"t1","message":{}}`, `{"type":"message","id":"x","timestamp":"t1"}`, `{"type":"message","id":"y","timestamp":"t1"}`},
		{Claude(), `{"type":"user","uuid":"u-1","parentUuid":null,"timestamp":"t1","message":{"content":"a"}}`,
			`{"type":"user","uuid":"u-1","parentUuid":null,"timestamp":"t1","message":{"content":"b"}}`,
			`{"type":"user","uuid":"u-2","parentUuid":"u-1","timestamp":"t1"}`},
	}
	for _, c := range cases {
		ka, ok := c.st.EntryKey([]byte(c.a))
		if !ok {
			t.Fatalf("%s: %s is no entry", c.st.Name(), c.a)
		}
		if kp, ok := c.st.EntryKey([]byte(c.pruned)); !ok || kp != ka {
			t.Errorf("%s: the rewritten entry's key is %q, %v; want %q", c.st.Name(), kp, ok, ka)
		}
		if ko, ok := c.st.EntryKey([]byte(c.other)); !ok || ko == ka {
			t.Errorf("%s: another entry's key is %q, %v; want one other than %q", c.st.Name(), ko, ok, ka)
		}
		for _, l := range []string{"not json", `{"type":"message"}`} {
			if k, ok := c.st.EntryKey([]byte(l)); ok {
				t.Errorf("%s: %q has key %q; want none", c.st.Name(), l, k)
			}
		}
	}
	if k, ok := Codex().EntryKey([]byte(`{"type":"response_item","timestamp":"t1"}`)); ok {
		t.Errorf("codex: a line has key %q; Codex's lines carry no ids", k)
	}
}

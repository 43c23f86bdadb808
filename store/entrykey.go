package store

import "github.com/ompsync/ompsync/session"

func (f family) EntryKey(line []byte) (string, bool) {
	return entryKey(session.ParseEntry(line))
}

func (claude) EntryKey(line []byte) (string, bool) { return entryKey(claudeEntry(line)) }

func (codex) EntryKey([]byte) (string, bool) { return "", false }

// entryKey is an entry's id and timestamp, as session.Format's merge keys
// it; an entry without an id is known by its bytes there.
func entryKey(e session.Entry, ok bool) (string, bool) {
	if !ok || e.ID == "" {
		return "", false
	}
	return e.ID + "\x00" + e.Timestamp, true
}

package agent

import "github.com/ompsync/ompsync/remote"

// NoDeleteMessage is what the agent says, once, when the remote refuses it
// a delete: its key may write and not delete (against a stolen machine or
// ransomware), so it goes on backing up and leaves the rest to another.
const NoDeleteMessage = "this machine's key may not delete objects: compaction and retention are left to a machine whose key may (run `ompsync compact` and `ompsync prune` there); backups go on, nothing is lost"

// deletesDenied reports whether err is the remote refusing this machine's
// key a delete; the first time, it says so and stops compaction and
// retention for the rest of the run, since every later try would be
// refused alike. What a refused delete leaves is a correct repository:
// a merged chunk beside the chunks it replaces, which readers accept.
func (a *Agent) deletesDenied(err error) bool {
	if !remote.DeleteDenied(err) {
		return false
	}
	if !a.noDelete {
		a.noDelete = true
		a.log.Warn(NoDeleteMessage)
	}
	return true
}

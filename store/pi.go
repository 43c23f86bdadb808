package store

// Pi is pi's store (pi-mono, npm @mariozechner/pi-coding-agent): the agent
// dir (~/.pi/agent, or $PI_CODING_AGENT_DIR) holds
// sessions/--<cwd>--/<time>_<id>.jsonl, the cwd always absolute with "/",
// "\" and ":" turned into "-" (dist/core/session-manager.js,
// getDefaultSessionDir). omp's format family without the title slot: the
// header line is the first, entries merge by id and parentId. pi keeps no
// artifact folder, blob or archive, appends each line with appendFileSync
// (no descriptor stays open) and takes no lock on a session; auth.json,
// models.json and settings.json beside sessions/ are never read.
// `pi --session <id prefix>` resumes a session.
func Pi() *Store {
	return family{secrets: []string{"auth.json"}}.store(&Store{
		name:   "pi",
		resume: "pi --session",
		home:   Home{Title: "pi's agent folder", Env: "PI_CODING_AGENT_DIR", Dir: ".pi/agent"},
	})
}

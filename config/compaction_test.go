package config

import (
	"strings"
	"testing"
	"time"
)

func TestCompactionAndRetentionKeys(t *testing.T) {
	env, home := newEnv(t)
	c := mustLoad(t, opts(env))
	want := Compaction{Idle: 10 * time.Minute, MaxChunks: 64}
	if c.Compaction != want || c.Retention != (Retention{Generations: 30 * 24 * time.Hour}) {
		t.Fatalf("defaults: %+v %+v", c.Compaction, c.Retention)
	}
	if k, _ := Lookup("compaction.max_chunks"); k.Kind != "int" || k.Flag != "compaction-max-chunks" {
		t.Errorf("Lookup(compaction.max_chunks) = %+v", k)
	}

	o := opts(env)
	o.ConfigFile = writeConfig(t, home, "compaction:\n  max_chunks: 16\n  idle: 90s\nretention:\n  generations: 0\n  deleted: 2160h\n")
	c = mustLoad(t, o)
	if c.Compaction != (Compaction{Idle: 90 * time.Second, MaxChunks: 16}) || c.Retention != (Retention{Deleted: 90 * 24 * time.Hour}) {
		t.Fatalf("from file: %+v %+v", c.Compaction, c.Retention)
	}
	env["OMPSYNC_COMPACTION_MAX_CHUNKS"] = "32"
	if c := mustLoad(t, opts(env)); c.Compaction.MaxChunks != 32 {
		t.Fatalf("from env: %+v", c.Compaction)
	}

	for _, tt := range []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"OMPSYNC_COMPACTION_MAX_CHUNKS": "lots"}, []string{"compaction.max_chunks (env OMPSYNC_COMPACTION_MAX_CHUNKS)", `"lots" is not a whole number`}},
		{map[string]string{"OMPSYNC_COMPACTION_MAX_CHUNKS": "0"}, []string{"compaction.max_chunks", "above zero"}},
		{map[string]string{"OMPSYNC_COMPACTION_IDLE": "0s"}, []string{"compaction.idle", "not positive"}},
		{map[string]string{"OMPSYNC_RETENTION_DELETED": "-1h"}, []string{"retention.deleted", "not positive"}},
		{map[string]string{"OMPSYNC_RETENTION_GENERATIONS": "30d"}, []string{"retention.generations", `"30d" is not a duration`}},
	} {
		env, _ := newEnv(t)
		for k, v := range tt.env {
			env[k] = v
		}
		_, err := Load(opts(env))
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %v, want it to say %q", tt.env, err, w)
			}
		}
	}
}

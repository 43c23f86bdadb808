package config

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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

// TestDurationHintFitsTheKey: a duration without a unit is answered with
// the key's own default as the example; 5s, suggested for every key, kept
// superseded generations 5 seconds when the user followed it.
func TestDurationHintFitsTheKey(t *testing.T) {
	for _, tt := range []struct{ flag, want string }{
		{"--retention-generations=5", `retention.generations (flag --retention-generations): "5" has no unit; write a duration like 720h (the default); units are h, m, s and ms`},
		{"--retention-deleted=5", `retention.deleted (flag --retention-deleted): "5" has no unit; write a duration like 720h, or 0 (the default); units are h, m, s and ms`},
		{"--interval=5", `interval (flag --interval): "5" has no unit; write a duration like 2s (the default); units are h, m, s and ms`},
		{"--compaction-idle=30d", `compaction.idle (flag --compaction-idle): "30d" is not a duration; write it like 10m (the default); units are h, m, s and ms`},
		{"--compaction-idle=0", `compaction.idle (flag --compaction-idle): "0" is not positive; write a duration above zero like 10m (the default)`},
	} {
		env, _ := newEnv(t)
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		AddFlags(fs, "retention.generations", "retention.deleted", "interval", "compaction.idle")
		if err := fs.Parse([]string{tt.flag}); err != nil {
			t.Fatal(err)
		}
		o := opts(env)
		o.Flags = fs
		if _, err := Load(o); err == nil || err.Error() != tt.want {
			t.Errorf("%s: %v\nwant %s", tt.flag, err, tt.want)
		}
	}
}

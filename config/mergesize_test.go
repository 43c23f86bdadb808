package config

import (
	"strings"
	"testing"
)

// restore.max_merge_size is 256 MiB unless set; it must leave room for a
// merge, so 0 is refused with the key named.
func TestMaxMergeSize(t *testing.T) {
	env, _ := newEnv(t)
	cfg, err := Load(opts(env))
	if err != nil || cfg.Restore.MaxMergeSize.Bytes() != 256<<20 {
		t.Fatalf("default: %d, %v", cfg.Restore.MaxMergeSize.Bytes(), err)
	}
	env["OMPSYNC_RESTORE_MAX_MERGE_SIZE"] = "1GiB"
	if cfg, err = Load(opts(env)); err != nil || cfg.Restore.MaxMergeSize.Bytes() != 1<<30 {
		t.Fatalf("1GiB from the environment: %d, %v", cfg.Restore.MaxMergeSize.Bytes(), err)
	}
	for _, bad := range []string{"0", "lots"} {
		env["OMPSYNC_RESTORE_MAX_MERGE_SIZE"] = bad
		_, err = Load(opts(env))
		if err == nil || !strings.Contains(err.Error(), "restore.max_merge_size (env OMPSYNC_RESTORE_MAX_MERGE_SIZE)") || !strings.Contains(err.Error(), "above zero") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

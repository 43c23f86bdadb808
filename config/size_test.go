package config

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "1024": 1024, "500MB": 500e6, "2GiB": 2 << 30, "1 gib": 1 << 30, "7KiB": 7 << 10, "3B": 3, "1TB": 1e12,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "GiB", "1.5GiB", "-1", "12 parsecs", "99999999999TiB"} {
		if _, err := ParseSize(bad); err == nil || !strings.Contains(err.Error(), "not a size") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	env, _ := newEnv(t)
	env["OMPSYNC_SEARCH_CACHE_SIZE"] = "250MB"
	cfg, err := Load(opts(env))
	if err != nil || cfg.Search.CacheSize.Bytes() != 250e6 || cfg.Search.CacheSize != "250MB" {
		t.Fatalf("250MB from the environment: %v", err)
	}
	env["OMPSYNC_SEARCH_CACHE_SIZE"] = "lots"
	_, err = Load(opts(env))
	if err == nil || !strings.Contains(err.Error(), "search.cache_size (env OMPSYNC_SEARCH_CACHE_SIZE)") {
		t.Errorf("a bad size: %v", err)
	}
}

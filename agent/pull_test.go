package agent

import (
	"testing"

	"github.com/ompsync/ompsync/repo"
)

// sync.include and sync.exclude choose sessions by path, folder or cwd.
func TestPullIncluded(t *testing.T) {
	e := repo.CatalogEntry{Path: "sessions/-src-api/2026_x.jsonl", Cwd: "/home/u/src/api"}
	cases := []struct {
		include, exclude []string
		want             bool
	}{
		{nil, nil, true},
		{[]string{"sessions/-src-*"}, nil, true},
		{[]string{"/home/u/src/*"}, nil, true},
		{[]string{"sessions/-other"}, nil, false},
		{nil, []string{"/home/u/src/api"}, false},
		{nil, []string{"sessions/-src-api/*"}, false},
		{[]string{"sessions/*"}, []string{"sessions/-scratch"}, true},
	}
	for _, c := range cases {
		a := &Agent{opts: Options{PullInclude: c.include, PullExclude: c.exclude}}
		if got := a.pullIncluded(e); got != c.want {
			t.Errorf("include %v exclude %v: %v, want %v", c.include, c.exclude, got, c.want)
		}
	}
}

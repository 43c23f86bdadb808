package bench

import (
	"math"
	"time"
)

// Tree is a realistic sessions folder: sessions of many sizes over a few
// project folders, some of them forks of others.
type Tree struct {
	Sessions []*Session
	Forks    int
	Bytes    int64
}

// BuildTree writes n sessions of about total bytes in all into agentDir.
// Sizes are spread log-uniformly over a factor of 400 (a few KB to a few
// MB, as a user's sessions are: many short ones, some long), and about
// forkShare of the sessions are forks of an earlier one, each repeating
// its parent's entries as omp's fork writes them, with 5-30 new entries.
func BuildTree(g *Gen, agentDir string, n int, total int64, forkShare float64, clock time.Time) (*Tree, error) {
	rng := g.Rand()
	forks := int(math.Round(float64(n) * forkShare))
	originals := n - forks
	if originals < 1 {
		originals, forks = 1, n-1
	}
	// A fork repeats a parent of average size: the originals get what is
	// left of the budget after the forks' share.
	budget := float64(total) * float64(originals) / float64(n)
	w := make([]float64, originals)
	var sum float64
	for i := range w {
		w[i] = math.Exp(rng.Float64() * math.Log(400))
		sum += w[i]
	}
	cwds := CwdDirs(12)
	t := &Tree{}
	cwdOf := map[*Session]string{}
	// Forks come after their parents, spread over the whole run.
	forkAt := map[int]bool{}
	for len(forkAt) < forks {
		forkAt[1+rng.IntN(n-1)] = true
	}
	next := 0
	for i := range n {
		at := clock.Add(time.Duration(i) * 7 * time.Minute)
		var s *Session
		var err error
		if forkAt[i] && len(t.Sessions) > 0 {
			parent := t.Sessions[rng.IntN(len(t.Sessions))]
			s, err = g.Fork(agentDir, cwdOf[parent], at, parent, 5+rng.IntN(26))
			cwdOf[s] = cwdOf[parent]
			t.Forks++
		} else {
			cwd := cwds[rng.IntN(len(cwds))]
			size := int(budget * w[next%originals] / sum)
			next++
			s, err = g.NewSessionSize(agentDir, cwd, at, max(size, 2<<10))
			cwdOf[s] = cwd
		}
		if err != nil {
			return nil, err
		}
		t.Sessions = append(t.Sessions, s)
		t.Bytes += s.Size
	}
	return t, nil
}

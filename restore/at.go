package restore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ompsync/ompsync/repo"
)

// ParseAt reads a --at time: RFC 3339 (2026-10-07T14:00:00Z, or with an
// offset), or a duration back from now (3h, 90m, 2h30m, or whole days:
// 2d).
func ParseAt(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		if days, err = strconv.Atoi(n); days < 0 || days >= 1<<16 {
			err = errors.New("out of range") // past what a Duration holds either way
		}
		d = time.Duration(days) * 24 * time.Hour
	}
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-10-07T14:00:00Z) nor a duration back from now (3h, 2d)", s)
	}
	return now.Add(-d), nil
}

// streamAt streams one machine's copy of a stream as the backup held it
// at opts.At, as streamCopy streams the newest: the newest generation that
// had bytes on the remote then (or opts.Generation), cut to the bytes
// uploaded by then. Upload times are the chunks' marks, or the listing's
// times for chunks without them; the title slot is the head object's only
// if the head was written by then. A copy without a generation means the
// machine held no copy at that time.
func streamAt(ctx context.Context, r *repo.Repo, t *target, s repo.Stream, inv *repo.StreamInventory, limit int64, opts Options) (copyData, error) {
	for i := len(inv.Generations) - 1; i >= 0; i-- {
		g := inv.Generations[i]
		// A generation is named by when it began, on the machine whose
		// clock also times its uploads: one begun after opts.At had no
		// bytes on the remote then.
		if !g.HasMeta || repo.GenerationTime(g.Name).After(opts.At) || opts.Generation != "" && g.Name != opts.Generation {
			continue
		}
		at := *g
		if at.HasHead && at.HeadModTime.After(opts.At) {
			at.HasHead = false // its title came later: the first chunk's slot
		}
		c, err := streamCopy(ctx, r, t, s, &at, limit, opts)
		if err != nil {
			return c, err
		}
		if c.size == 0 {
			continue // begun, but nothing uploaded by then
		}
		return c, nil
	}
	return copyData{}, nil
}

// errNoCopy: no machine held a copy of the session at the time asked for.
var errNoCopy = errors.New("no copy then")

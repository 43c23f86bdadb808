// Package progress draws one progress bar at the bottom of a terminal
// (with mpb) for long work: counts and bytes done of their totals, the
// rate and the time left. Off a terminal it draws nothing, so logs, pipes
// and --json output never hold a bar.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// Terminal reports whether w is a terminal.
func Terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Output is a command's standard error: log lines go through it, above the
// bar while one is drawn.
type Output struct {
	w  io.Writer
	on bool // bars are drawn

	mu sync.Mutex
	p  *mpb.Progress // the container of the bar being drawn, if any
}

// NewOutput writes to w, and draws bars there when on (a terminal, and
// the user did not ask for quiet or machine-readable output).
func NewOutput(w io.Writer, on bool) *Output { return &Output{w: w, on: on} }

// Write writes log lines, above the bar when one is drawn.
func (o *Output) Write(b []byte) (int, error) {
	o.mu.Lock()
	p := o.p
	o.mu.Unlock()
	if p != nil {
		if n, err := p.Write(b); err == nil {
			return n, nil
		}
	}
	return o.w.Write(b)
}

// State is how far the work is. A zero BytesTotal means the bytes are
// counted without a known total; the bar then fills by Count.
type State struct {
	Count, CountTotal int
	Bytes, BytesTotal int64
}

// Bar is one bar. A nil *Bar draws nothing.
type Bar struct {
	o     *Output
	unit  string // what Count counts: "files", "sessions"
	verb  string // what Bytes are: "" (done of total) or "checked"
	start time.Time
	poll  func() State // how far the work is, asked at each redraw
	bar   *mpb.Bar
	p     *mpb.Progress
	done  sync.Once
}

// refresh is how often the bar is redrawn.
const refresh = 150 * time.Millisecond

// Start draws a bar counting unit ("files") until Done; poll, safe to call
// from any goroutine, says how far the work is, at every redraw. With verb
// "checked" the bytes are a count without a total. It returns nil (a bar
// that draws nothing) when the output draws no bars.
func (o *Output) Start(unit, verb string, poll func() State) *Bar {
	if o == nil || !o.on {
		return nil
	}
	p := mpb.New(mpb.WithOutput(o.w), mpb.WithWidth(32), mpb.WithRefreshRate(refresh), mpb.WithAutoRefresh())
	b := &Bar{o: o, unit: unit, verb: verb, start: time.Now(), poll: poll, p: p}
	// Each redraw fills the bar by poll: nothing else keeps its count.
	fill := mpb.BarFillerMiddleware(func(base mpb.BarFiller) mpb.BarFiller {
		return mpb.BarFillerFunc(func(w io.Writer, st decor.Statistics) error {
			if !st.Completed {
				st.Current = int64(b.fraction(poll()) * (permille - 1)) // full only when done
			}
			return base.Fill(w, st)
		})
	})
	b.bar = p.New(permille, mpb.BarStyle().Lbound("[").Rbound("]").Filler("=").Tip(">").Padding(" "), fill,
		mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return b.counts() })),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return b.rateAndLeft() })),
		mpb.BarRemoveOnComplete(),
	)
	o.mu.Lock()
	o.p = p
	o.mu.Unlock()
	return b
}

// permille is the bar's total: it fills by the fraction done.
const permille = 1000

// Done removes the bar; log lines go straight to the output again.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.done.Do(func() {
		b.o.mu.Lock()
		b.o.p = nil
		b.o.mu.Unlock()
		b.bar.SetTotal(permille, true)
		b.p.Wait()
	})
}

func (b *Bar) fraction(s State) float64 {
	switch {
	case s.BytesTotal > 0 && b.verb == "":
		return min(float64(s.Bytes)/float64(s.BytesTotal), 1)
	case s.CountTotal > 0:
		return min(float64(s.Count)/float64(s.CountTotal), 1)
	}
	return 0
}

// counts is "12/2000 files  3.2 MiB/535.0 MiB" (or "3.2 MiB checked").
func (b *Bar) counts() string {
	s := b.poll()
	out := fmt.Sprintf("%d/%d %s", s.Count, s.CountTotal, b.unit)
	switch {
	case b.verb != "":
		out += fmt.Sprintf("  %s %s", Size(s.Bytes), b.verb)
	case s.BytesTotal > 0:
		out += fmt.Sprintf("  %s/%s", Size(s.Bytes), Size(s.BytesTotal))
	}
	return out
}

// rateAndLeft is "1.1 MiB/s  4m30s left", from the average since the
// start.
func (b *Bar) rateAndLeft() string {
	s := b.poll()
	el := time.Since(b.start).Seconds()
	if el <= 0 {
		return ""
	}
	rate := fmt.Sprintf("%.1f %s/s", float64(s.Count)/el, b.unit)
	if s.Bytes > 0 {
		rate = Size(int64(float64(s.Bytes)/el)) + "/s"
	}
	left := "?"
	if frac := b.fraction(s); frac > 0 {
		left = time.Duration(el * (1 - frac) / frac * float64(time.Second)).Round(time.Second).String()
	}
	return rate + "  " + left + " left"
}

// Size is n bytes as people read it: 512 B, 3.2 KiB, 535.0 MiB.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

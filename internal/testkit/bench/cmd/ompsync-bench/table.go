//go:build unix

package main

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the result table. Empty peer cells mean the peer has
// no such figure.
type row struct {
	Figure  string `json:"figure"`
	Target  string `json:"target"`
	Ompsync string `json:"ompsync"`
	Rclone  string `json:"rclone,omitempty"`
	Whole   string `json:"whole_file,omitempty"`
	Restic  string `json:"restic,omitempty"`
	Versus  string `json:"versus,omitempty"`
	Result  string `json:"result"`
}

func (r *runner) add(x row) {
	if x.Result == "" {
		x.Result = "-"
	}
	r.table = append(r.table, x)
	r.log.Info("figure", "figure", x.Figure, "ompsync", x.Ompsync, "rclone", x.Rclone, "whole", x.Whole, "restic", x.Restic, "result", x.Result)
}

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "MISS"
}

// printTable prints the rows as a Markdown table, aligned for a terminal.
func printTable(w io.Writer, rows []row) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| figure\t target\t ompsync\t rclone copy\t whole-file\t restic\t ompsync vs peers\t result\t")
	fmt.Fprintln(tw, "|---\t---\t---\t---\t---\t---\t---\t---\t")
	for _, x := range rows {
		cells := []string{x.Figure, x.Target, x.Ompsync, x.Rclone, x.Whole, x.Restic, x.Versus, x.Result}
		for i, c := range cells {
			if c == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintf(tw, "| %s\t\n", strings.Join(cells, "\t "))
	}
	tw.Flush()
}

func numCPU() int { return runtime.NumCPU() }

func mb(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 10<<10:
		return fmt.Sprintf("%.0f KB", float64(n)/1e3)
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func secs(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	}
}

// times says how many times more b is than a, as "12x".
func times(a, b float64) string {
	if a <= 0 {
		return "-"
	}
	r := b / a
	if r >= 10 {
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

func median(d []time.Duration) time.Duration { return percentile(d, 0.5) }

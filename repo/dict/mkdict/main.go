// Command mkdict builds the zstd dictionary ompsync compresses objects with
// (docs/FORMAT.md, "Object encoding") from session files. It keeps only their
// shape: every JSON key, and the string values short enough to be schema
// words (entry types, roles, tool names); longer strings, which are what a
// user said or a tool printed, become empty. The dictionary thus holds omp's
// vocabulary and none of anyone's conversation.
//
// The dictionary is part of the repository format: once released it never
// changes (a new one gets a new id). It was built with
//
//	go run ./repo/dict/mkdict -out repo/dict/omp1.zdict testdata/corpus/*.jsonl
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/klauspost/compress/zstd"
)

// id is the dictionary's id, written in every frame that uses it: "omp1",
// inside zstd's range for private dictionaries.
const id = 0x6f6d7031

// maxWord is the longest string value kept as vocabulary.
const maxWord = 24

// maxHistory bounds the dictionary's content (a decoder keeps it in memory).
const maxHistory = 32 << 10

func main() {
	out := flag.String("out", "", "file to write the dictionary to (required)")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkdict -out FILE SESSION.jsonl...")
		os.Exit(2)
	}
	dict, err := build(flag.Args())
	if err == nil {
		err = os.WriteFile(*out, dict, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdict:", err)
		os.Exit(1)
	}
}

func build(files []string) ([]byte, error) {
	var samples [][]byte
	var history []byte
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var v any
			if json.Unmarshal(sc.Bytes(), &v) != nil {
				continue
			}
			s, err := json.Marshal(shape(v))
			if err != nil {
				return nil, err
			}
			s = append(s, '\n')
			samples = append(samples, s)
			if !seen[string(s)] && len(history)+len(s) <= maxHistory {
				seen[string(s)] = true
				history = append(history, s...)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	if len(samples) == 0 {
		return nil, fmt.Errorf("no JSON lines in %d files", len(files))
	}
	// A chunk's header line starts every chunk: its keys belong in the
	// dictionary too.
	header := []byte(`{"v":1,"start":0,"end":0,"hash_from":256,"sha256":"","stream_sha256":""}` + "\n")
	return zstd.BuildDict(zstd.BuildDictOptions{
		ID:       id,
		Contents: samples,
		History:  append(header, history...),
		Offsets:  [3]int{1, 4, 8},
	})
}

// shape keeps a JSON value's structure and its short strings; arrays keep
// their first three elements.
func shape(v any) any {
	switch v := v.(type) {
	case string:
		if len(v) > maxWord {
			return ""
		}
		return v
	case []any:
		return shapeAll(v[:min(len(v), 3)])
	case map[string]any:
		for k, e := range v {
			v[k] = shape(e)
		}
		return v
	}
	return v
}

func shapeAll(vs []any) []any {
	out := make([]any, len(vs))
	for i, e := range vs {
		out[i] = shape(e)
	}
	return out
}

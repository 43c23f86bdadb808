package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/remote/backend"
	"github.com/ompsync/ompsync/remote/file"
)

// TestVerifyRepair damages this machine's objects on the folder remote and
// on an S3 server (a flipped chunk, a deleted chunk, the first chunk
// flipped or deleted, the last chunk deleted, an artifact's chunk
// flipped, a damaged and a deleted catalog, a deleted and a flipped
// blob): verify exits 1, verify --repair exits 0, verify exits 0 after,
// and another machine restores the local bytes. A flipped chunk whose
// local bytes changed too is reported (exit 1) and the object is left as
// it was.
func TestVerifyRepair(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		if b.Name != "file" && b.Name != "s3-aws" {
			return // one S3 server and client is enough here
		}
		t.Parallel()
		ctx := context.Background()
		blobData := []byte("an image omp stored\n")
		sum := sha256.Sum256(blobData)
		blob := hex.EncodeToString(sum[:])
		const id = "019ad000-0000-7000-8000-0000000e9b17"
		for _, tc := range []struct {
			name   string
			damage func(t *testing.T, c remote.Client, chunks []string) string // the key damaged
			local  bool                                                        // change the local bytes too
			enc    bool                                                        // an encrypted repository
		}{
			{"flipped-chunk", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[1]) }, false, false},
			{"deleted-chunk", func(t *testing.T, c remote.Client, ch []string) string { return deleteKey(t, c, ch[1]) }, false, false},
			{"flipped-first-chunk", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[0]) }, false, false},
			{"flipped-first-chunk-local-changed", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[0]) }, true, false},
			{"encrypted-flipped-first-chunk", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[0]) }, false, true},
			{"flipped-artifact-chunk", func(t *testing.T, c remote.Client, ch []string) string {
				return flipKey(t, c, artifactChunks(t, c, ch[0])[1])
			}, false, false},
			{"deleted-first-chunk", func(t *testing.T, c remote.Client, ch []string) string { return deleteKey(t, c, ch[0]) }, false, false},
			{"deleted-last-chunk", func(t *testing.T, c remote.Client, ch []string) string { return deleteKey(t, c, ch[len(ch)-1]) }, false, false},
			{"damaged-catalog", func(t *testing.T, c remote.Client, ch []string) string {
				return flipKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/machines/laptop/catalog")
			}, false, false},
			{"deleted-catalog", func(t *testing.T, c remote.Client, ch []string) string {
				return deleteKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/machines/laptop/catalog")
			}, false, false},
			{"deleted-blob", func(t *testing.T, c remote.Client, ch []string) string {
				return deleteKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/blobs/"+blob)
			}, false, false},
			{"flipped-blob", func(t *testing.T, c remote.Client, ch []string) string {
				return flipKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/blobs/"+blob)
			}, false, false},
			{"local-changed", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[1]) }, true, false},
			{"flipped-last-chunk", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[len(ch)-1]) }, false, false},
			{"flipped-last-chunk-local-changed", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[len(ch)-1]) }, true, false},
			{"deleted-chunk-local-changed", func(t *testing.T, c remote.Client, ch []string) string { return deleteKey(t, c, ch[1]) }, true, false},
			{"encrypted-flipped-chunk", func(t *testing.T, c remote.Client, ch []string) string { return flipKey(t, c, ch[1]) }, false, true},
			{"encrypted-deleted-chunk", func(t *testing.T, c remote.Client, ch []string) string { return deleteKey(t, c, ch[1]) }, false, true},
			{"encrypted-flipped-blob", func(t *testing.T, c remote.Client, ch []string) string {
				return flipKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/blobs/"+blob)
			}, false, true},
			{"encrypted-damaged-catalog", func(t *testing.T, c remote.Client, ch []string) string {
				return flipKey(t, c, strings.Split(ch[0], "/v1/")[0]+"/v1/machines/laptop/catalog")
			}, false, true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				url := b.URL + "/" + tc.name
				m := newMachineEnv(t, url, b.S3, "laptop")
				if tc.enc {
					key := filepath.Join(t.TempDir(), "age.key")
					m.mustRun(0, "keygen", "--out", key)
					m.env = []string{"OMPSYNC_ENCRYPTION_IDENTITY_FILE=" + key}
				}
				writeFile(t, filepath.Join(m.agentDir, "blobs", blob), string(blobData), 0o600)
				m.newSession(id, entry("0000e9b1", "", "first, with blob:sha256:"+blob))
				artifact := strings.TrimSuffix(m.sessionFile(id), ".jsonl") + "/1.bash.log"
				var artifactData []byte
				for i, e := range []string{"second", "third", ""} {
					artifactData = fmt.Appendf(artifactData, "output %d of a tool omp ran\n", i)
					writeFile(t, artifact, string(artifactData), 0o600)
					m.mustRun(0, "agent", "--once")
					if e != "" {
						m.appendSession(id, entry(fmt.Sprintf("0000e9b%d", i+2), fmt.Sprintf("0000e9b%d", i+1), e))
					}
				}
				m.mustRun(0, "agent", "--once")

				var chunks []string
				for obj, err := range b.Client.List(ctx, tc.name+"/v1/sessions/"+id+"/laptop/session/", remote.ListOptions{}) {
					if err != nil {
						t.Fatal(err)
					}
					if base := obj.Key[strings.LastIndex(obj.Key, "/")+1:]; strings.Contains(base, "-") {
						chunks = append(chunks, obj.Key)
					}
				}
				slices.Sort(chunks)
				if len(chunks) != 3 {
					t.Fatalf("want 3 chunks on the remote, got %v", chunks)
				}
				key := tc.damage(t, b.Client, chunks)
				m.mustRun(1, "verify")
				if tc.local {
					local := m.sessionFile(id)
					body := readFile(t, local)
					body[len(body)/2] ^= 1
					writeFile(t, local, string(body), 0o600)
					stored, _ := getStored(b.Client, key)
					out := m.mustRun(1, "verify", "--repair")
					if line := lineWith(out, "NOT REPAIRED "+id+": "+key[len(tc.name)+1:]+": "); !strings.Contains(line, "local copy changed too") {
						t.Errorf("verify --repair with the local copy changed says nothing of it:\n%s", out)
					}
					if after, _ := getStored(b.Client, key); !bytes.Equal(after, stored) {
						t.Errorf("verify --repair wrote %s with other bytes", key)
					}
					m.mustRun(1, "verify")
					return
				}
				if out := m.mustRun(0, "verify", "--repair"); strings.Contains(out, "NOT REPAIRED") {
					t.Errorf("verify --repair repaired everything but says otherwise:\n%s", out)
				}
				m.mustRun(0, "verify")
				if tc.enc {
					for obj, err := range b.Client.List(ctx, tc.name+"/v1/", remote.ListOptions{}) {
						if err != nil {
							t.Fatal(err)
						}
						if got := getKey(t, b.Client, obj.Key); !bytes.HasPrefix(got, []byte("age-encryption.org/v1\n")) {
							t.Errorf("%s is not encrypted after the repair", obj.Key)
						}
					}
				}
				other := newMachineEnv(t, url, b.S3, "desk")
				other.env = m.env
				to := t.TempDir()
				other.mustRun(0, "restore", "--all", "--to", to)
				rel, _ := filepath.Rel(m.agentDir, m.sessionFile(id))
				if got := readFile(t, filepath.Join(to, rel)); !bytes.Equal(got, m.readSession(id)) {
					t.Errorf("the restore on another machine differs from the local file:\n%s\n%s", got, m.readSession(id))
				}
				if got := readFile(t, filepath.Join(to, rel[:len(rel)-len(".jsonl")], "1.bash.log")); !bytes.Equal(got, artifactData) {
					t.Errorf("the restored artifact differs: %q", got)
				}
				if got := readFile(t, filepath.Join(to, "blobs", blob)); !bytes.Equal(got, blobData) {
					t.Errorf("the restored blob differs: %q", got)
				}
			})
		}
	})
}

// lineWith is the line of out that holds s ("" for none).
func lineWith(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// getStored is the stored bytes of key (nil and an error when there is
// none).
func getStored(c remote.Client, key string) ([]byte, error) {
	rc, err := c.Get(context.Background(), key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// getKey is the stored bytes of key.
func getKey(t *testing.T, c remote.Client, key string) []byte {
	t.Helper()
	b, err := getStored(c, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// flipKey flips a byte in the middle of the object at key.
func flipKey(t *testing.T, c remote.Client, key string) string {
	t.Helper()
	b := getKey(t, c, key)
	b[len(b)/2] ^= 0xff
	if err := c.Put(context.Background(), key, b, remote.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	return key
}

func deleteKey(t *testing.T, c remote.Client, key string) string {
	t.Helper()
	if err := c.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	return key
}

// artifactChunks is the sorted chunk keys of the artifact streams of the
// session whose chunk key is sessionChunk.
func artifactChunks(t *testing.T, c remote.Client, sessionChunk string) []string {
	t.Helper()
	var out []string
	for obj, err := range c.List(context.Background(), sessionChunk[:strings.Index(sessionChunk, "/session/")]+"/artifacts/", remote.ListOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if base := obj.Key[strings.LastIndex(obj.Key, "/")+1:]; strings.Contains(base, "-") {
			out = append(out, obj.Key)
		}
	}
	slices.Sort(out)
	if len(out) < 2 {
		t.Fatalf("want 2 or more artifact chunks on the remote, got %v", out)
	}
	return out
}

// TestVerifyRepairSaysWhatItCannot: a damaged copy that no local file
// proves (an older copy of this machine's, another machine's) is one NOT
// REPAIRED line each, saying what to do; verify --repair exits 1 and the
// objects stay as they were.
func TestVerifyRepairSaysWhatItCannot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	client, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const mine, theirs = "019ad000-0000-7000-8000-0000000e9c01", "019ad000-0000-7000-8000-0000000e9c02"
	laptop := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "laptop")
	laptop.newSession(mine, entry("0000e9c1", "", "first"), entry("0000e9c2", "0000e9c1", "second"))
	laptop.mustRun(0, "agent", "--once")
	laptop.newSession(mine, entry("0000e9c1", "", "first")) // shorter: a new copy
	laptop.mustRun(0, "agent", "--once")
	desk := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "desk")
	desk.newSession(theirs, entry("0000e9c3", "", "on the desk"))
	desk.mustRun(0, "agent", "--once")

	chunksOf := func(id, machine string) []string {
		var keys []string
		for obj, err := range client.List(ctx, "v1/sessions/"+id+"/"+machine+"/session/", remote.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if base := obj.Key[strings.LastIndex(obj.Key, "/")+1:]; strings.Contains(base, "-") {
				keys = append(keys, obj.Key)
			}
		}
		slices.Sort(keys) // generations are named by time: the older first
		return keys
	}
	older, other := flipKey(t, client, chunksOf(mine, "laptop")[0]), flipKey(t, client, chunksOf(theirs, "desk")[0])
	olderGen := strings.Split(older, "/")[5]
	stored := map[string][]byte{older: getKey(t, client, older), other: getKey(t, client, other)}

	laptop.mustRun(1, "verify")
	out := laptop.mustRun(1, "verify", "--repair")
	for _, want := range []string{
		"NOT REPAIRED " + mine + ": an older copy of session (generation " + olderGen + "): the local file no longer holds its bytes",
		"NOT REPAIRED " + theirs + ": machine desk's copy of session (generation " + strings.Split(other, "/")[5] + "): only that machine holds its bytes; run 'ompsync verify --repair' there",
	} {
		if lineWith(out, want) == "" {
			t.Errorf("verify --repair does not say %q:\n%s", want, out)
		}
	}
	for key, b := range stored {
		if !bytes.Equal(getKey(t, client, key), b) {
			t.Errorf("verify --repair wrote over %s", key)
		}
	}
}

// TestVerifyRepairCatalogWithoutState: this machine's catalog damaged and
// its local state lost too: verify --repair writes the catalog again from
// a listing of what this machine uploaded (exit 0), so a session deleted
// here before, which only the lost catalog listed, is still restored by
// id.
func TestVerifyRepairCatalogWithoutState(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const kept, gone = "019ad000-0000-7000-8000-0000000e9d01", "019ad000-0000-7000-8000-0000000e9d02"
	m := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "laptop")
	m.newSession(kept, entry("0000e9d1", "", "kept"))
	m.newSession(gone, entry("0000e9d2", "", "deleted here"))
	m.mustRun(0, "agent", "--once")
	want := m.readSession(gone)
	if err := os.Remove(m.sessionFile(gone)); err != nil {
		t.Fatal(err)
	}
	m.mustRun(0, "agent", "--once")
	flipKey(t, client, "v1/machines/laptop/catalog")
	if err := os.RemoveAll(filepath.Join(m.home, "state")); err != nil {
		t.Fatal(err)
	}
	m.mustRun(1, "verify")
	if out := m.mustRun(0, "verify", "--repair"); !strings.Contains(out, "no local state to write it again from") {
		t.Errorf("verify --repair does not say how it wrote the catalog again:\n%s", out)
	}
	m.mustRun(0, "verify")
	to := t.TempDir()
	m.mustRun(0, "restore", gone, "--to", to)
	matches, _ := filepath.Glob(filepath.Join(to, "sessions", "*", "*_"+gone+".jsonl"))
	if len(matches) != 1 || !bytes.Equal(readFile(t, matches[0]), want) {
		t.Errorf("restore by id of the session the lost catalog listed: %v", matches)
	}
}

// TestVerifyRepairSharedChunk: the desk pulled the vm's session and went
// on with it, so its copy reads the vm's chunks through reference chunks.
// A chunk of the vm's copy flipped damages both copies; verify --repair on
// the vm puts the chunk back, which mends the desk's copy too: it says
// the chunk was repaired, prints no NOT REPAIRED line and exits 0.
func TestVerifyRepairSharedChunk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	client, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const id = "019ad000-0000-7000-8000-0000000e9e01"
	vm := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "vm")
	vm.newSession(id, entry("0000e9e1", "", "first"))
	for i, e := range []string{"second", "third"} {
		vm.mustRun(0, "agent", "--once")
		vm.appendSession(id, entry(fmt.Sprintf("0000e9e%d", i+2), fmt.Sprintf("0000e9e%d", i+1), e))
	}
	vm.mustRun(0, "agent", "--once")
	desk := newMachineEnv(t, "file://"+dir, backend.S3Options{}, "desk")
	desk.mustRun(0, "agent", "--once", "--pull")
	desk.appendSession(id, entry("0000e9e4", "0000e9e3", "on the desk"))
	desk.mustRun(0, "agent", "--once")

	chunksOf := func(machine string) []string {
		var keys []string
		for obj, err := range client.List(t.Context(), "v1/sessions/"+id+"/"+machine+"/session/", remote.ListOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			if base := obj.Key[strings.LastIndex(obj.Key, "/")+1:]; strings.Contains(base, "-") {
				keys = append(keys, obj.Key)
			}
		}
		slices.Sort(keys)
		return keys
	}
	chunks := chunksOf("vm")
	if len(chunks) != 3 {
		t.Fatalf("want 3 chunks of the vm's copy, got %v", chunks)
	}
	flipKey(t, client, chunks[1])
	if out := vm.mustRun(1, "verify"); !strings.Contains(out, "desk") {
		t.Fatalf("verify does not find the desk's copy damaged through the vm's chunk:\n%s", out)
	}
	out := vm.mustRun(0, "verify", "--repair")
	if !strings.Contains(out, "repaired  "+id) || strings.Contains(out, "NOT REPAIRED") {
		t.Errorf("verify --repair mended both copies but says otherwise:\n%s", out)
	}
	vm.mustRun(0, "verify")

	// The desk's own bytes (what it added) only the desk can put back.
	own := chunksOf("desk")
	key := flipKey(t, client, own[len(own)-1])
	out = vm.mustRun(1, "verify", "--repair")
	if want := "NOT REPAIRED " + id + ": machine desk's copy of session (generation " + strings.Split(key, "/")[5] + "): only that machine holds its bytes"; lineWith(out, want) == "" {
		t.Errorf("verify --repair does not say %q:\n%s", want, out)
	}
}

package crypt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ompsync/ompsync/agent"
	"github.com/ompsync/ompsync/crypt"
	"github.com/ompsync/ompsync/internal/testkit/remotetest"
	"github.com/ompsync/ompsync/internal/testkit/repotest"
	"github.com/ompsync/ompsync/remote"
	"github.com/ompsync/ompsync/repo"
	"github.com/ompsync/ompsync/restore"
)

func TestMain(m *testing.M) { remotetest.Main(m) }

// agentDir is an omp agent dir whose every file says the secret: session
// lines, title, cwd, an artifact file and a blob.
type agentDir struct {
	root  string
	ids   []string
	files map[string][]byte // rel path -> bytes
}

func titleSlot(title string) string {
	s := fmt.Sprintf(`{"type":"title","v":1,"title":%q,"updatedAt":"2026-11-30T00:00:00.000Z","pad":"`, title)
	return s + strings.Repeat(" ", 256-len(s)-3) + "\"}\n"
}

func newAgentDir(t testing.TB, sessions, lines int) *agentDir {
	t.Helper()
	d := &agentDir{root: filepath.Join(t.TempDir(), "agent"), files: map[string][]byte{}}
	write := func(rel string, data []byte) {
		p := filepath.Join(d.root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		d.files[rel] = data
	}
	for i := range sessions {
		id := fmt.Sprintf("0190%04x-0000-7000-8000-00000000c0de", i)
		d.ids = append(d.ids, id)
		var b bytes.Buffer
		b.WriteString(titleSlot("title: " + secret))
		fmt.Fprintf(&b, `{"type":"session","version":3,"id":%q,"timestamp":"2026-11-30T00:00:00Z","cwd":"/home/u/%s"}`+"\n", id, secret)
		for j := range lines {
			fmt.Fprintf(&b, `{"type":"message","id":"%08x","parentId":null,"timestamp":"2026-11-30T00:00:00Z","text":"%s %d %s"}`+"\n",
				j, secret, j, strings.Repeat("lorem ipsum ", j%50))
		}
		base := "sessions/-home-u-work/2026-11-30T00-00-00-000Z_" + id
		write(base+".jsonl", b.Bytes())
		write(base+"/subagents/0-Explore.jsonl", []byte(`{"type":"message","text":"`+secret+` in an artifact"}`+"\n"))
	}
	blob := []byte("blob bytes: " + secret)
	sum := sha256.Sum256(blob)
	write("blobs/"+hex.EncodeToString(sum[:]), blob)
	return d
}

// backup runs one agent pass of dir into r.
func backup(t testing.TB, r *repo.Repo, dir *agentDir) error {
	t.Helper()
	ag, err := agent.New(r, agent.Options{AgentDir: dir.root, StateDir: filepath.Join(filepath.Dir(dir.root), "state"), Machine: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()
	return ag.Once(context.Background())
}

// remoteObjects is every object's key and bytes, through the client.
func remoteObjects(t *testing.T, c remote.Client) map[string][]byte { return remotetest.Objects(t, c) }

// grepRemote fails if the secret is in any object name or byte. A file
// remote is also searched on disk, temp files and all.
func grepRemote(t *testing.T, b remotetest.Backend) int {
	t.Helper()
	objs := remoteObjects(t, b.Client)
	for k, v := range objs {
		if strings.Contains(k, secret) || bytes.Contains(v, []byte(secret)) || bytes.Contains(v, []byte("MARKER")) {
			t.Errorf("object %s shows the secret", k)
		}
		if k != repo.MarkerKey && !bytes.HasPrefix(v, []byte(repo.AgeHeader)) {
			t.Errorf("object %s is not age-encrypted", k)
		}
	}
	if dir, ok := strings.CutPrefix(b.URL, "file://"); ok {
		files := 0
		err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			files++
			data, err := os.ReadFile(p)
			if bytes.Contains(data, []byte(secret)) || strings.Contains(p, secret) {
				t.Errorf("file %s on the remote shows the secret", p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if files != len(objs) {
			t.Errorf("%d files on disk, %d objects listed", files, len(objs))
		}
	}
	return len(objs)
}

// With encryption on, nothing a session said reaches the remote, and every
// byte comes back, through the repository and through restore.
func TestNothingLeaks(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		ctx := context.Background()
		k := newKey(t)
		dir := newAgentDir(t, 3, 400)
		if err := backup(t, repo.New(b.Client, mustNew(t, crypt.Options{Recipients: []string{k.recipient}, IdentityFile: k.file})), dir); err != nil {
			t.Fatal(err)
		}
		// Each session's chunks (its meta rides in the first, format 2),
		// the catalog and its recent object, the marker.
		n := grepRemote(t, b)
		if n < 3+3 {
			t.Fatalf("only %d objects on the remote", n)
		}

		// Reassembled through a fresh repository holding only the identity.
		r := repo.New(b.Client, mustNew(t, crypt.Options{IdentityFile: k.file}))
		for _, id := range dir.ids {
			invs, err := r.Inventory(ctx, id, "laptop")
			if err != nil {
				t.Fatal(err)
			}
			if len(invs) != 2 {
				t.Fatalf("session %s: %d streams, want the session and its artifact", id, len(invs))
			}
			for _, inv := range invs {
				as, err := repotest.ReadGeneration(ctx, r, inv.Stream, inv.Newest(), 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				rel := as.Meta.Path // an artifact file's meta names the file itself
				if want, ok := dir.files[rel]; !ok || !bytes.Equal(as.Data, want) {
					t.Errorf("%s %s: reassembled %d bytes differ from the %d on disk (%s)", id, inv.Stream.Name, len(as.Data), len(want), rel)
				}
			}
		}

		// And through restore, into an empty agent dir.
		to := filepath.Join(t.TempDir(), "restored")
		rep, err := restore.Run(ctx, r, nil, restore.Options{AgentDir: to, All: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Problems) > 0 || slices.ContainsFunc(rep.Results, func(r restore.Result) bool { return !r.OK() }) {
			t.Fatalf("restore: %+v", rep)
		}
		for rel, want := range dir.files {
			got, err := os.ReadFile(filepath.Join(to, filepath.FromSlash(rel)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("restored %s: %v (%d bytes, want %d)", rel, err, len(got), len(want))
			}
		}
	})
}

// Restore without the right identity stops before writing anything, and
// says which key it needs.
func TestRestoreNeedsTheKey(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		ctx := context.Background()
		k, other := newKey(t), newKey(t)
		dir := newAgentDir(t, 2, 50)
		if err := backup(t, repo.New(b.Client, mustNew(t, crypt.Options{IdentityFile: k.file})), dir); err != nil {
			t.Fatal(err)
		}
		before := remoteObjects(t, b.Client)
		for _, tc := range []struct {
			name  string
			codec repo.Codec
		}{
			{"wrong identity", mustNew(t, crypt.Options{IdentityFile: other.file})},
			{"recipients only", mustNew(t, crypt.Options{Recipients: []string{k.recipient}})},
			{"no encryption", repo.NewZstd()},
		} {
			t.Run(tc.name, func(t *testing.T) {
				to := filepath.Join(t.TempDir(), "restored")
				rep, err := restore.Run(ctx, repo.New(b.Client, tc.codec), nil, restore.Options{AgentDir: to, All: true})
				if err == nil {
					t.Fatalf("restore succeeded: %+v", rep)
				}
				if !strings.Contains(err.Error(), k.fp) || !strings.Contains(err.Error(), "encryption.identity_file") {
					t.Errorf("error does not name the key needed (%s) and the setting: %v", k.fp, err)
				}
				if testing.Verbose() {
					t.Log(err)
				}
				var files []string
				filepath.WalkDir(to, func(p string, e fs.DirEntry, err error) error {
					if err == nil && !e.IsDir() {
						files = append(files, p)
					}
					return nil
				})
				if len(files) > 0 {
					t.Errorf("restore wrote %v", files)
				}
			})
		}
		if !equalObjects(before, remoteObjects(t, b.Client)) {
			t.Error("failed restores changed the remote")
		}
	})
}

// An agent without encryption refuses an encrypted remote, and an encrypted
// one refuses a plaintext remote with data: nothing is written either way.
func TestAgentRefusesMixedRemotes(t *testing.T) {
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		k := newKey(t)
		dir := newAgentDir(t, 1, 20)
		enc := repo.New(b.Client, mustNew(t, crypt.Options{IdentityFile: k.file}))
		if err := backup(t, enc, dir); err != nil {
			t.Fatal(err)
		}
		before := remoteObjects(t, b.Client)
		other := newAgentDir(t, 1, 30) // another machine's dir, same name "laptop"
		err := backup(t, repo.New(b.Client, repo.NewZstd()), other)
		if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), k.fp) {
			t.Errorf("plaintext agent into an encrypted remote: %v", err)
		}
		if !equalObjects(before, remoteObjects(t, b.Client)) {
			t.Error("the refused agent changed the remote")
		}
	})
	remotetest.Each(t, func(t *testing.T, b remotetest.Backend) {
		k := newKey(t)
		if err := backup(t, repo.New(b.Client, repo.NewZstd()), newAgentDir(t, 1, 20)); err != nil {
			t.Fatal(err)
		}
		before := remoteObjects(t, b.Client)
		err := backup(t, repo.New(b.Client, mustNew(t, crypt.Options{IdentityFile: k.file})), newAgentDir(t, 1, 30))
		if !errors.Is(err, repo.ErrEncryptionMismatch) || !strings.Contains(err.Error(), "ompsync rekey") {
			t.Errorf("encrypted agent into a plaintext remote with data: %v", err)
		}
		if !equalObjects(before, remoteObjects(t, b.Client)) {
			t.Error("the refused agent changed the remote")
		}
	})
}

func equalObjects(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

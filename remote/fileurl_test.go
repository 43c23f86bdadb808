package remote

import (
	"net/url"
	"testing"
)

// TestFileURLWindowsPaths: a Windows folder becomes file:///C:/..., which
// parses with no host, and its path turns back into the same folder; the
// default remote on Windows was file://C:/..., refused as naming a host.
func TestFileURLWindowsPaths(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		sep  byte
		want string
	}{
		{`C:\Users\ana\AppData\ompsync\remote`, '\\', "file:///C:/Users/ana/AppData/ompsync/remote"},
		{`d:\`, '\\', "file:///d:/"},
		{`\\server\share\backup`, '\\', "file:////server/share/backup"},
		{"/home/ana/.local/share/ompsync/remote", '/', "file:///home/ana/.local/share/ompsync/remote"},
	} {
		raw := "file://" + urlPath(tt.dir, tt.sep)
		if raw != tt.want {
			t.Errorf("%s: URL %q, want %q", tt.dir, raw, tt.want)
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host != "" {
			t.Fatalf("%s: %q parses with host %q, %v", tt.dir, raw, u.Host, err)
		}
		if got := fileDir(u.Path, tt.sep); got != tt.dir {
			t.Errorf("%q: folder %q, want %q", raw, got, tt.dir)
		}
	}
	for p, want := range map[string]string{"/C:/x/../y": `C:\y`, "/C:": `C:\`, "/C:x": `\C:x`, "/x/y": `\x\y`} {
		if got := fileDir(p, '\\'); got != want {
			t.Errorf("Windows folder of %q: %q, want %q", p, got, want)
		}
	}
}

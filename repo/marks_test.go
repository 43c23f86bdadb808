package repo

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// Marks travel as [end, unix_ms] in the chunk header; a header with the
// most marks, the longest numbers and a reference stays within the 1024
// bytes every reader takes, and the last mark (the chunk's end) survives.
func TestMarksInHeader(t *testing.T) {
	data := []byte("a line\n")
	h := ChunkHeader{Start: 5, End: 12, HashFrom: 0, SHA256: HashHex(data), StreamSHA256: HashHex(data),
		Uploaded: []Mark{{End: 9, At: 1791334080000}, {End: 12, At: 1791334140000}}}
	plain := EncodeChunk(h, data)
	if !bytes.Contains(plain, []byte(`"uploaded":[[9,1791334080000],[12,1791334140000]]`)) {
		t.Errorf("header %s", plain[:bytes.IndexByte(plain, '\n')])
	}
	got, body, err := DecodeChunk(plain, 5, 12)
	if err != nil || !bytes.Equal(body, data) || len(got.Uploaded) != 2 || got.Uploaded[1] != h.Uploaded[1] {
		t.Fatalf("decode: %v %+v", err, got)
	}

	// A reader from before marks: Go's decoder drops the member.
	var old struct {
		V            int
		Start, End   int64
		HashFrom     int64  `json:"hash_from"`
		SHA256       string `json:"sha256"`
		StreamSHA256 string `json:"stream_sha256"`
		Ref          *ChunkSource
	}
	dec := json.NewDecoder(bytes.NewReader(plain[:bytes.IndexByte(plain, '\n')]))
	if err := dec.Decode(&old); err != nil || old.End != 12 || old.SHA256 != h.SHA256 {
		t.Errorf("a reader without marks: %v %+v", err, old)
	}

	// The most a header can need.
	end := int64(1) << 62
	var many []Mark
	for i := int64(1); i <= 1000; i++ {
		many = append(many, Mark{End: end - 1000 + i, At: 1<<62 + i})
	}
	big := ChunkHeader{Start: end - 1000, End: end, HashFrom: 256, SHA256: strings.Repeat("f", 64), StreamSHA256: strings.Repeat("f", 64),
		Ref: &ChunkSource{Machine: strings.Repeat("m", 64), Generation: strings.Repeat("f", 16)}, Uploaded: many}
	plain = EncodeChunk(big, nil)
	nl := bytes.IndexByte(plain, '\n')
	if nl > maxHeader {
		t.Fatalf("header of %d bytes, past the %d readers take", nl, maxHeader)
	}
	got, _, err = DecodeChunk(plain, big.Start, big.End)
	if err != nil || len(got.Uploaded) == 0 || len(got.Uploaded) > MaxMarks || got.Uploaded[len(got.Uploaded)-1].End != end {
		t.Fatalf("the biggest header: %v, %d marks", err, len(got.Uploaded))
	}
}

// Marks that cannot belong to the chunk are dropped, not refused: the
// bytes are still good, and the listing's time stands in.
func TestBadMarksDropped(t *testing.T) {
	data := []byte("0123456789")
	for _, ms := range [][]Mark{
		{{End: 5, At: 1}},                    // not at the end
		{{End: 12, At: 1}},                   // past the end
		{{End: 10, At: 1}, {End: 10, At: 2}}, // not rising
		{{End: 0, At: 1}, {End: 10, At: 2}},  // at the start
		{{End: 10, At: 0}},                   // no time
	} {
		h := ChunkHeader{V: 1, Start: 0, End: 10, SHA256: HashHex(data), StreamSHA256: HashHex(data), Uploaded: ms}
		hb, _ := json.Marshal(h)
		plain := append(append(hb, '\n'), data...)
		got, body, err := DecodeChunk(plain, 0, 10)
		if err != nil || !bytes.Equal(body, data) || got.Uploaded != nil {
			t.Errorf("marks %v: %v, kept %v", ms, err, got.Uploaded)
		}
	}
}

// Thinning never says bytes arrived earlier than they did, and keeps the
// end.
func TestThinMarks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var ms []Mark
		var end, at int64 = 0, 1_000_000
		for range 1 + rng.IntN(60) {
			end += 1 + rng.Int64N(100)
			at += rng.Int64N(10_000) - 1000 // now and then earlier (listing times)
			ms = append(ms, Mark{End: end, At: max(at, 1)})
		}
		n := 1 + rng.IntN(20)
		thin := ThinMarks(ms, n)
		if len(thin) > n || thin[len(thin)-1].End != end {
			t.Fatalf("thinned %d marks to %d, want at most %d ending at %d", len(ms), len(thin), n, end)
		}
		for probe := int64(990_000); probe < at+20_000; probe += 777 {
			tm := time.UnixMilli(probe)
			a, _ := UploadedBy(ms, tm)
			b, _ := UploadedBy(thin, tm)
			if b > a {
				t.Fatalf("at %d the thinned marks say %d bytes, the marks %d", probe, b, a)
			}
		}
	}
}

func TestUploadedBy(t *testing.T) {
	ms := []Mark{{End: 100, At: 1000}, {End: 200, At: 3000}, {End: 300, At: 2000}}
	for _, tc := range []struct {
		at   int64
		want int64
	}{{999, 0}, {1000, 100}, {2500, 100}, {3000, 300}} {
		if n, _ := UploadedBy(ms, time.UnixMilli(tc.at)); n != tc.want {
			t.Errorf("at %d: %d bytes, want %d", tc.at, n, tc.want)
		}
	}
	c := ChunkRef{Start: 0, End: 50, ModTime: time.UnixMilli(4000)}
	if got := ChunkMarks(ChunkHeader{}, c, 0); len(got) != 1 || got[0] != (Mark{End: 50, At: 4000}) {
		t.Errorf("a chunk without marks: %v, want its listing time", got)
	}
	if got := ChunkMarks(ChunkHeader{}, ChunkRef{End: 50}, 0); got[0].At <= time.Now().UnixMilli() {
		t.Errorf("a chunk without marks or listing time counts as uploaded at %v", got[0].Time())
	}
}

// UploadedBy is how many bytes of a generation with these marks (in
// stream order) were on the remote at t, and the time of the last mark
// that counts: the reference the chunk walk's cut (cutAt) is tested against.
func UploadedBy(ms []Mark, t time.Time) (int64, time.Time) {
	var n int64
	var when time.Time
	ms0 := t.UnixMilli()
	for _, m := range ms {
		if m.At > ms0 {
			break
		}
		n, when = m.End, m.Time()
	}
	return n, when
}

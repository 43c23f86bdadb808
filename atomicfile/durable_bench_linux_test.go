package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkDurableFiles writes 1,000 new files of 500 KiB into 12 folders
// from 16 goroutines, as a restore of 500 MB does, made durable four ways:
// each synced before it is linked into place (Write, what ompsync's
// restore did before its placer started each file's writeback at once),
// each written around the page cache (O_DIRECT) and synced, all written
// and then one syncfs of their file system, or not synced at all. It reports the CPU the whole machine spent (/proc/stat, kernel
// writeback included), which on a machine whose cores the work fills is
// what the syncs cost; each run starts from a synced disk.
func BenchmarkDurableFiles(b *testing.B) {
	data := make([]byte, 500<<10)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, mode := range []string{"sync-each", "odirect-each", "syncfs-once", "no-sync"} {
		b.Run(mode, func(b *testing.B) {
			var cpu float64
			for range b.N {
				b.StopTimer()
				root := b.TempDir()
				for d := range 12 {
					if err := os.Mkdir(filepath.Join(root, strconv.Itoa(d)), 0o700); err != nil {
						b.Fatal(err)
					}
				}
				syscall.Sync()
				busy0 := machineBusy(b)
				b.StartTimer()
				writeFiles(b, root, data, mode)
				b.StopTimer()
				cpu += machineBusy(b) - busy0
				b.StartTimer()
			}
			b.ReportMetric(cpu*1000/float64(b.N), "machine-cpu-ms/op")
		})
	}
}

func writeFiles(b *testing.B, root string, data []byte, mode string) {
	// O_DIRECT wants the buffer aligned to the block size (data's length
	// is a multiple of it).
	buf := make([]byte, len(data)+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&buf[0]))%4096)) % 4096
	aligned := buf[off : off+len(data)]
	copy(aligned, data)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := filepath.Join(root, strconv.Itoa(i%12), fmt.Sprintf("s%04d.jsonl", i))
				var err error
				switch mode {
				case "sync-each":
					err = Write(name, data, Options{Exclusive: true, NoDirSync: true})
				case "odirect-each":
					err = writeDirect(name, aligned)
				default:
					err = os.WriteFile(name, data, 0o600)
				}
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range 1000 {
		work <- i
	}
	close(work)
	wg.Wait()
	if mode == "syncfs-once" {
		d, err := os.Open(root)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		if err := unix.Syncfs(int(d.Fd())); err != nil {
			b.Fatal(err)
		}
	}
}

// writeDirect writes data to a new file name with O_DIRECT, around the page
// cache (no copy into it, no writeback later), and syncs its metadata.
func writeDirect(name string, data []byte) error {
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Sync()
}

// machineBusy is the CPU time, in seconds, all cores of the machine spent
// outside idle and iowait since boot.
func machineBusy(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Skip("no /proc/stat")
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var ticks float64
	for i, v := range f[1:] {
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		n, _ := strconv.ParseFloat(v, 64)
		ticks += n
	}
	return ticks / 100 // USER_HZ
}

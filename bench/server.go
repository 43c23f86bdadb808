package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ompsync/ompsync/remote/remotetest"
)

// Server is a private versitygw on a loopback port: the same binary the
// tests use (remotetest.FindVersitygw).
type Server struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	Dir       string // one folder per bucket

	cmd  *exec.Cmd
	done chan struct{}
	logs bytes.Buffer
}

// StartServer starts versitygw with its buckets under dir.
func StartServer(dir string) (*Server, error) {
	bin, err := remotetest.FindVersitygw()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &Server{Endpoint: "http://" + addr, AccessKey: "bench-" + randHex(6), SecretKey: randHex(20), Dir: data}
	// --keep-alive: without it versitygw answers every request with
	// "Connection: close", and each request of every tool pays a TCP
	// connect, where S3 services keep connections open.
	s.cmd = exec.Command(bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet", "--keep-alive", "posix", data)
	s.cmd.Stdout, s.cmd.Stderr = &s.logs, &s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start versitygw: %w", err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("versitygw exited at start: %s", s.logs.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return s, nil
		}
	}
	s.Close()
	return nil, errors.New("versitygw did not listen within 15s")
}

// Pid is the server's process id, for CPU accounting.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Close stops the server.
func (s *Server) Close() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// CreateBucket creates a bucket through the S3 API.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	api := s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       "us-east-1",
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", name, err)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Upload sends a request with a body of size bytes on a fresh connection the way fetch and the
// OpenAI SDKs do (no Expect: 100-continue, the whole body written before the answer is read) and
// returns the answer with its body read. The test fails if the server reset the upload: such a
// client then loses the answer.
func Upload(t testing.TB, addr, method, path string, header map[string]string, size int) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n", method, path, size)
	for k, v := range header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	head.WriteString("\r\n")
	if _, err := io.WriteString(conn, head.String()); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("a"), 64<<10)
	for sent := 0; sent < size; sent += len(chunk) {
		if _, err := conn.Write(chunk[:min(len(chunk), size-sent)]); err != nil {
			t.Fatalf("the server broke off the upload after %d of %d bytes: %v", sent, size, err)
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after the upload: %v", err)
	}
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("answer body: %v", err)
	}
	_ = res.Body.Close()
	return res, string(raw)
}

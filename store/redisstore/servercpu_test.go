package redisstore

import (
	"testing"
	"time"
)

func TestParseInfoCPU(t *testing.T) {
	d, err := parseInfoCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9\r\n")
	if err != nil || d != 3750*time.Millisecond {
		t.Fatalf("got %v, %v; want 3.75s", d, err)
	}
	for _, bad := range []string{"", "# CPU\r\nused_cpu_sys:1\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := parseInfoCPU(bad); err == nil {
			t.Errorf("parseInfoCPU(%q): no error", bad)
		}
	}
}

func TestServerCPU(t *testing.T) {
	s, _ := newTestStore(t)
	d, err := s.ServerCPU(t.Context())
	if err != nil || d <= 0 {
		t.Fatalf("ServerCPU = %v, %v; want a positive time", d, err)
	}
}

package server

import (
	"fmt"
	"testing"
)

// Server serves.
type Server struct {
	addr string
}

type (
	Handler interface {
		Serve() error
	}
	ID int
)

func New(addr string) *Server {
	return &Server{addr: addr}
}

func (s *Server) Start() error {
	return fmt.Errorf("no")
}

func (s Server) Addr() string { return s.addr }

func (c *Conn) Close() {}

func TestStart(t *testing.T) {
	New("x").Start()
}

func TestSkipped(t *testing.T) {
	t.Skip("later")
}

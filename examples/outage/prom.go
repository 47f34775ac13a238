package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// promServer serves otelx's metrics on /metrics through the OpenTelemetry
// Prometheus exporter, with names as the exporter translates them: dots
// become underscores, seconds get _seconds, counters _total.
type promServer struct {
	reader sdkmetric.Reader
	srv    *http.Server
	ln     net.Listener
	done   chan error
}

// servePrometheus starts serving on ln.
func servePrometheus(ln net.Listener) (*promServer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	p := &promServer{reader: exp, ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	go func() { p.done <- p.srv.Serve(ln) }()
	return p, nil
}

// addr is the scrape target's address.
func (p *promServer) addr() string { return p.ln.Addr().String() }

// close stops serving.
func (p *promServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if serr := <-p.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

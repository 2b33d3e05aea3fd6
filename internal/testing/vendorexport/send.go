package vendorexport

import (
	"context"
	"fmt"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// HTTPBody is ld as an OTLP/HTTP logs export body, JSON or protobuf, with
// its Content-Type.
func HTTPBody(ld plog.Logs, asJSON bool) (body []byte, contentType string, err error) {
	req := plogotlp.NewExportRequestFromLogs(ld)
	if asJSON {
		body, err = req.MarshalJSON()
		return body, "application/json", err
	}
	body, err = req.MarshalProto()
	return body, "application/x-protobuf", err
}

// ExportGRPC sends ld over OTLP/gRPC to addr (host:port, plaintext),
// waiting until ctx ends for the receiver to be ready.
func ExportGRPC(ctx context.Context, addr string, ld plog.Logs) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := plogotlp.NewGRPCClient(conn).Export(ctx, plogotlp.NewExportRequestFromLogs(ld), grpc.WaitForReady(true)); err != nil {
		return fmt.Errorf("OTLP/gRPC export: %w", err)
	}
	return nil
}

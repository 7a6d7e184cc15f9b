// Package healthcheck is the tiny HTTP probe the edge and orgsvc binaries
// run as `-healthcheck URL`, so that container images without a shell or
// curl can still have a health check.
package healthcheck

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Timeout bounds the whole probe.
const Timeout = 3 * time.Second

// Check GETs url and reports an error unless it answers 200 within Timeout.
func Check(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, res.Status)
	}
	return nil
}

package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/wasmhooks/wasmhooks/server/api"
)

// Event is one Server-Sent Event of an approval's stream: Name is "status",
// "resolved" or "timeout", Result its data.
type Event struct {
	Name   string
	Result api.ResultDoc
}

// WaitResult waits up to waitSeconds for approval id's result over the
// approval's Server-Sent Events stream (one connection, heartbeats keep it
// open): the resumed run's outcome once resolved, nil when the wait ended
// with the approval still pending, ErrUnrecorded if none will come. on, if
// not nil, sees every event.
func (c *Client) WaitResult(ctx context.Context, tenant, id string, waitSeconds int, on func(Event)) (*Outcome, error) {
	path := "/v1/tenants/" + esc(tenant) + "/approvals/" + esc(id) + "/events?wait=" + strconv.Itoa(waitSeconds)
	req, err := http.NewRequestWithContext(ctx, "GET", c.Base+path, nil)
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
		p := &api.Problem{}
		if json.Unmarshal(b, p) != nil || p.Code == "" {
			return nil, fmt.Errorf("client: GET %s: %s", path, resp.Status)
		}
		return nil, p
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return nil, fmt.Errorf("client: GET %s: Content-Type %q, not text/event-stream", path, ct)
	}
	var ev Event
	err = readEvents(resp.Body, func(name string, data []byte) (bool, error) {
		ev = Event{Name: name}
		if err := json.Unmarshal(data, &ev.Result); err != nil {
			return false, fmt.Errorf("client: event %q: %w", name, err)
		}
		if on != nil {
			on(ev)
		}
		return name == "resolved" || name == "timeout", nil
	})
	if err != nil {
		return nil, err
	}
	switch ev.Name {
	case "resolved":
		if ev.Result.Status == "unrecorded" {
			return nil, ErrUnrecorded
		}
		return decodeOutcome(ev.Result.Outcome)
	case "timeout":
		return nil, nil
	}
	return nil, fmt.Errorf("client: GET %s: the stream ended before a resolved or timeout event", path)
}

// readEvents parses a text/event-stream (the WHATWG HTML standard's
// format: "field: value" lines, a blank line dispatching the event, lines
// starting with ':' comments) and calls f with each event's name ("message"
// when it has none) and data, until f says stop or the stream ends. The
// stream is bounded to MaxResponseBytes an event.
func readEvents(r io.Reader, f func(name string, data []byte) (stop bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxResponseBytes)
	var name string
	var data []byte
	has := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if has {
				if name == "" {
					name = "message"
				}
				if stop, err := f(name, data); stop || err != nil {
					return err
				}
			}
			name, data, has = "", nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			if has {
				data = append(data, '\n')
			}
			data = append(data, value...)
			has = true
		}
		if len(data) > MaxResponseBytes {
			return fmt.Errorf("client: an event larger than %d bytes", MaxResponseBytes)
		}
	}
	return sc.Err()
}

package abi

import "fmt"

// MaxManifestBytes bounds the hook_v1.manifest custom section.
const MaxManifestBytes = 64 << 10

// Manifest is the JSON object a module carries in its hook_v1.manifest custom
// section. Unknown fields are ignored.
type Manifest struct {
	Name         string   `json:"name,omitempty"`
	Version      string   `json:"version,omitempty"`
	Description  string   `json:"description,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Points lists where the hook may be bound; nil means anywhere. A
	// platform's own point is listed by its name, which starts with "x."
	// (IsPlatformPointName); the chain checks that it is registered.
	Points []string `json:"points,omitempty"`
	// SettingsSchema is a JSON Schema for the hook's settings; nil means
	// any object. It is the hook author's, so untrusted: the host accepts
	// only what chain.CheckSettingsSchema accepts (no references, bounded
	// size, compiles); DecodeManifest checks only that it is an object.
	SettingsSchema map[string]any `json:"settings_schema,omitempty"`
}

// AllowsPoint reports whether the hook may be bound at point.
func (m *Manifest) AllowsPoint(point string) bool {
	if m == nil || m.Points == nil {
		return true
	}
	for _, p := range m.Points {
		if p == point {
			return true
		}
	}
	return false
}

// Requests reports whether the manifest asks for capability name.
func (m *Manifest) Requests(name string) bool {
	if m == nil {
		return false
	}
	for _, c := range m.Capabilities {
		if c == name {
			return true
		}
	}
	return false
}

// ManifestError reports a manifest that refuses the module.
type ManifestError struct {
	Field  string
	Reason string
	Err    error
}

func (e *ManifestError) Error() string {
	msg := "invalid " + ManifestSection
	if e.Field != "" {
		msg += fmt.Sprintf(": field %q", e.Field)
	}
	return errorText(msg, e.Reason, e.Err)
}

func (e *ManifestError) Unwrap() error { return e.Err }

// DecodeManifest parses a manifest strictly: it must be one JSON object of at
// most MaxManifestBytes; every known field must have the right type.
func DecodeManifest(data []byte) (*Manifest, error) {
	obj, reason, err := parseObject(data, JSONLimits{MaxBytes: MaxManifestBytes, MaxDepth: 32})
	if reason != "" {
		return nil, &ManifestError{Reason: reason, Err: err}
	}
	m := &Manifest{}
	// Fields are checked in a fixed order, so that a manifest with several
	// bad fields always gets the same error.
	for _, f := range []struct {
		field string
		dst   *string
	}{{"name", &m.Name}, {"version", &m.Version}, {"description", &m.Description}} {
		if x, present := obj[f.field]; present {
			var ok bool
			if *f.dst, ok = x.(string); !ok {
				return nil, &ManifestError{Field: f.field, Reason: "must be a string"}
			}
		}
	}
	for _, f := range []struct {
		field string
		dst   *[]string
	}{{"capabilities", &m.Capabilities}, {"points", &m.Points}} {
		x, present := obj[f.field]
		if !present {
			continue
		}
		arr, ok := x.([]any)
		if !ok {
			return nil, &ManifestError{Field: f.field, Reason: "must be an array of strings"}
		}
		out := make([]string, 0, len(arr))
		for _, e := range arr {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, &ManifestError{Field: f.field, Reason: "must be an array of non-empty strings"}
			}
			out = append(out, s)
		}
		*f.dst = out
	}
	if m.Points != nil && len(m.Points) == 0 {
		// An empty list would mean "bind nowhere", while an absent one means
		// "bind anywhere"; the two are one omitempty apart, so the empty
		// list is refused rather than guessed at.
		return nil, &ManifestError{Field: "points", Reason: "must list at least one point (omit it to allow every point)"}
	}
	for _, p := range m.Points {
		// A platform's own point is named by its "x." name: the host
		// that binds the hook checks that its platform registered it.
		if _, ok := LookupPoint(p); !ok && !IsPlatformPointName(p) {
			return nil, &ManifestError{Field: "points", Reason: fmt.Sprintf("unknown point %q (a platform's own point is named x.NAME)", p)}
		}
	}
	if x, present := obj["settings_schema"]; present {
		s, ok := x.(map[string]any)
		if !ok {
			return nil, &ManifestError{Field: "settings_schema", Reason: "must be an object"}
		}
		m.SettingsSchema = s
	}
	return m, nil
}

// Package cloudevents reads Kafka records as CloudEvents, in binary mode,
// as the CloudEvents Go SDK's Kafka protocol bindings do, and validates
// them with the SDK: the tests' proof that every record walrelay emits is
// a CloudEvent any consumer can decode.
//
// The SDK is a dependency of the tests only: nothing under cmd/walrelay
// imports this package, so it is not linked into the walrelay binary.
package cloudevents

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/cloudevents/sdk-go/v2/event"
)

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// prefix starts the header of each context attribute in the Kafka
// binding; content-type carries datacontenttype.
const (
	prefix            = "ce_"
	contentTypeHeader = "content-type"
)

var specs = spec.WithPrefix(prefix)

// Decode reads the record with headers and value (nil for a null value, a
// tombstone) as the SDK's Kafka bindings read one in binary mode:
// ce_specversion picks the version, each other ce_ header becomes an
// attribute of that version or an extension, content-type becomes
// datacontenttype, and the value is the data (an event without data when
// the value is null or empty). The event must then pass event.Validate.
// Header keys are compared in lower case, as the bindings do; a key that
// repeats so is an error rather than a silent choice.
func Decode(headers []Header, value []byte) (*event.Event, error) {
	m, err := newMessage(headers, value)
	if err != nil {
		return nil, err
	}
	ev, err := binding.ToEvent(context.Background(), m)
	if err != nil {
		return nil, fmt.Errorf("decode as a CloudEvent: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return nil, fmt.Errorf("validate the CloudEvent: %w", err)
	}
	return ev, nil
}

// message is a Kafka record in binary mode, as a binding.MessageReader.
type message struct {
	version spec.Version
	keys    []string          // sorted, for errors that do not depend on map order
	headers map[string][]byte // by lower-case key
	value   []byte
}

func newMessage(headers []Header, value []byte) (*message, error) {
	m := &message{headers: make(map[string][]byte, len(headers)), value: value}
	for _, h := range headers {
		k := strings.ToLower(h.Key)
		if _, dup := m.headers[k]; dup {
			return nil, fmt.Errorf("header %q twice (keys compare in lower case)", k)
		}
		m.headers[k] = h.Value
		m.keys = append(m.keys, k)
	}
	slices.Sort(m.keys)
	if ct := string(m.headers[contentTypeHeader]); format.Lookup(ct) != nil {
		return nil, fmt.Errorf("content-type %q makes the record a structured-mode CloudEvent; want binary mode", ct)
	}
	sv := string(m.headers[specs.PrefixedSpecVersionName()])
	if m.version = specs.Version(sv); m.version == nil {
		return nil, fmt.Errorf("ce_specversion %q: not a CloudEvents version (a record without it is no binary-mode CloudEvent)", sv)
	}
	return m, nil
}

func (m *message) ReadEncoding() binding.Encoding { return binding.EncodingBinary }

func (m *message) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

// ReadBinary writes the attributes, extensions and data to w, as the
// SDK's Kafka bindings do.
func (m *message) ReadBinary(_ context.Context, w binding.BinaryWriter) error {
	for _, k := range m.keys {
		v := string(m.headers[k])
		var err error
		switch {
		case strings.HasPrefix(k, prefix):
			if attr := m.version.Attribute(k); attr != nil {
				err = w.SetAttribute(attr, v)
			} else {
				err = w.SetExtension(strings.TrimPrefix(k, prefix), v)
			}
		case k == contentTypeHeader:
			err = w.SetAttribute(m.version.AttributeFromKind(spec.DataContentType), v)
		}
		if err != nil {
			return fmt.Errorf("header %s: %w", k, err)
		}
	}
	if m.value != nil {
		return w.SetData(bytes.NewReader(m.value))
	}
	return nil
}

var _ binding.MessageMetadataReader = (*message)(nil)

// GetAttribute and GetExtension make message a binding.MessageMetadataReader,
// which the SDK's conversion asks for.
func (m *message) GetAttribute(k spec.Kind) (spec.Attribute, interface{}) {
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if k == spec.DataContentType {
		if v, ok := m.headers[contentTypeHeader]; ok {
			return attr, string(v)
		}
		return attr, nil
	}
	if v, ok := m.headers[attr.PrefixedName()]; ok {
		return attr, string(v)
	}
	return attr, nil
}

func (m *message) GetExtension(name string) interface{} {
	if v, ok := m.headers[prefix+strings.ToLower(name)]; ok {
		return string(v)
	}
	return nil
}

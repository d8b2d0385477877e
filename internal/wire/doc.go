// Package wire is the binary stream between rtrace's stages: sp-rtrace's
// protocol (a handshake, then type/length-framed packets) at version 3.0,
// with packets sp-rtrace lacked. It reads genuine sp-rtrace 2.0 streams too.
// docs/PROTOCOL.md describes every packet.
package wire

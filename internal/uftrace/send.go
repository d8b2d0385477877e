package uftrace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"rtrace/internal/regular"
)

// RecvPort is the TCP port `uftrace recv` listens on by default
// (UFTRACE_RECV_PORT in uftrace.h).
const RecvPort = 8090

// The messages of uftrace's network protocol (uftrace.h: struct
// uftrace_msg and UFTRACE_MSG_SEND_*; cmds/recv.c): a header of a 16-bit
// magic, a 16-bit type and a 32-bit payload length, all big-endian, then
// the payload.
const (
	msgMagic    = 0xface
	msgDirName  = 101 // the directory's name
	msgData     = 102 // int32 tid, then records appended to <tid>.dat
	msgInfo     = 105 // the info file: its header with fields big-endian, then the text
	msgMetaData = 106 // int32 name length, the name, the file's contents
	msgEnd      = 107
)

// maxChunk bounds one data message: the receiver reads a whole message
// into memory, and appends each to the file.
const maxChunk = 1 << 20

// Send writes the uftrace.data directory dir to w as `uftrace record
// --host` sends a trace to `uftrace recv` (cmds/record.c, after_save):
// the directory's name (name: recv creates it under its own -d
// directory), every <tid>.dat in chunks, then task.txt, the session maps,
// the .sym and .dbg files, the other files of the directory (rtrace's
// default.opts, usdt.txt), the info file last, and the end message. The
// receiver writes each file as its message comes: once info is there,
// the directory is complete.
func Send(w io.Writer, name, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if err := sendMsg(w, msgDirName, []byte(name)); err != nil {
		return err
	}
	var dats, maps, syms, dbgs, other []string
	for _, e := range ents {
		n := e.Name()
		switch {
		case !e.Type().IsRegular():
		case strings.HasSuffix(n, ".dat"):
			dats = append(dats, n)
		case strings.HasPrefix(n, "sid-") && strings.HasSuffix(n, ".map"):
			maps = append(maps, n)
		case strings.HasSuffix(n, ".sym"):
			syms = append(syms, n)
		case strings.HasSuffix(n, ".dbg"):
			dbgs = append(dbgs, n)
		case n != "info" && n != "task.txt":
			other = append(other, n)
		}
	}
	for _, n := range dats {
		tid, err := strconv.ParseInt(strings.TrimSuffix(n, ".dat"), 10, 32)
		if err != nil {
			other = append(other, n) // extern.dat and such: a file as it is
			continue
		}
		if err := sendData(w, int32(tid), filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	meta := slices.Concat([]string{"task.txt"}, maps, syms, dbgs)
	for _, n := range meta {
		if err := sendFile(w, dir, n); err != nil {
			return err
		}
	}
	for _, n := range other {
		if err := sendFile(w, dir, n); err != nil {
			return err
		}
	}
	return sendInfo(w, filepath.Join(dir, "info"))
}

// SendEnd ends the connection as uftrace record does. uftrace recv then
// closes it; a connection closed without it makes recv exit with an error
// (cmds/recv.c, read_all), so a sender sends it whatever happened before.
func SendEnd(w io.Writer) error { return sendMsg(w, msgEnd) }

func sendMsg(w io.Writer, typ uint16, payload ...[]byte) error {
	n := 0
	for _, p := range payload {
		n += len(p)
	}
	hdr := make([]byte, 8, 8+n)
	binary.BigEndian.PutUint16(hdr[0:], msgMagic)
	binary.BigEndian.PutUint16(hdr[2:], typ)
	binary.BigEndian.PutUint32(hdr[4:], uint32(n))
	msg := slices.Concat(append([][]byte{hdr}, payload...)...)
	_, err := w.Write(msg)
	return err
}

// sendData sends the records of path, tid's, in chunks of whole records,
// read one at a time.
func sendData(w io.Writer, tid int32, path string) error {
	f, err := regular.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var id [4]byte
	binary.BigEndian.PutUint32(id[:], uint32(tid))
	buf := make([]byte, maxChunk) // a multiple of 8: records are 16 bytes, payloads padded to 8
	for {
		n, err := io.ReadFull(f, buf)
		if n > 0 {
			if err := sendMsg(w, msgData, id[:], buf[:n]); err != nil {
				return err
			}
		}
		switch err {
		case nil:
		case io.EOF, io.ErrUnexpectedEOF:
			return nil
		default:
			return err
		}
	}
}

// sendFile sends the file name of dir as recv's metadata message.
func sendFile(w io.Writer, dir, name string) error {
	data, err := regular.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(name)))
	return sendMsg(w, msgMetaData, n[:], []byte(name), data)
}

// sendInfo sends the info file at path: recv turns the header's version,
// header size, feature and info masks and max stack from network byte
// order back into its own (cmds/recv.c, recv_trace_info).
func sendInfo(w io.Writer, path string) error {
	data, err := regular.ReadFile(path)
	if err != nil {
		return err
	}
	if len(data) < 40 || !bytes.HasPrefix(data, []byte("Ftrace!\x00")) {
		return fmt.Errorf("%s: not a uftrace info file", path)
	}
	hdr := slices.Clone(data[:40])
	le, be := binary.LittleEndian, binary.BigEndian
	be.PutUint32(hdr[8:], le.Uint32(data[8:]))   // version
	be.PutUint16(hdr[12:], le.Uint16(data[12:])) // header_size
	be.PutUint64(hdr[16:], le.Uint64(data[16:])) // feat_mask
	be.PutUint64(hdr[24:], le.Uint64(data[24:])) // info_mask
	be.PutUint16(hdr[32:], le.Uint16(data[32:])) // max_stack
	return sendMsg(w, msgInfo, hdr, data[40:])
}

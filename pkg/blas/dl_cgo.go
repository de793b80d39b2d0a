//go:build cgo

package blas

// This file holds every dlopen, dlsym, dlinfo and dlclose call of the
// package. dlerror's message is thread-local, so each C helper reads it in
// the same call as the function it checks and returns a copy.

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

static char* druto_dlerror_copy(const char* fallback) {
	const char* e = dlerror();
	return strdup(e != NULL ? e : fallback);
}

static void* druto_dlopen(const char* name, char** err) {
	dlerror();
	void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) *err = druto_dlerror_copy("dlopen failed");
	return h;
}

static void* druto_dlsym(void* h, const char* name, char** err) {
	dlerror();
	void* p = dlsym(h, name);
	const char* e = dlerror();
	if (e != NULL) *err = strdup(e);
	else if (p == NULL) *err = strdup("symbol is NULL");
	return p;
}

static char* druto_dlpath(void* h, char** err) {
	struct link_map* lm = NULL;
	dlerror();
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) {
		*err = druto_dlerror_copy("dlinfo failed");
		return NULL;
	}
	return strdup(lm->l_name);
}

static void druto_dlclose(void* h, char** err) {
	dlerror();
	if (dlclose(h) != 0) *err = druto_dlerror_copy("dlclose failed");
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// dlError is a failed dl call: the call, its argument and dlerror's message.
type dlError struct {
	Call, Arg, Msg string
}

func (e *dlError) Error() string { return fmt.Sprintf("blas: %s(%s): %s", e.Call, e.Arg, e.Msg) }

// takeErr turns a strdup'ed message (or NULL) into an error and frees it.
func takeErr(call, arg string, msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return &dlError{Call: call, Arg: arg, Msg: C.GoString(msg)}
}

// library is a dlopen'ed shared object.
type library struct {
	h    unsafe.Pointer
	name string
}

// dlOpen loads name (a soname searched the usual way, or a path) with
// RTLD_NOW | RTLD_LOCAL.
func dlOpen(name string) (*library, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg *C.char
	h := C.druto_dlopen(cname, &msg)
	if err := takeErr("dlopen", name, msg); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, &dlError{Call: "dlopen", Arg: name, Msg: "no handle"}
	}
	return &library{h: h, name: name}, nil
}

// sym returns the address of symbol name.
func (l *library) sym(name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var msg *C.char
	p := C.druto_dlsym(l.h, cname, &msg)
	if err := takeErr("dlsym", name, msg); err != nil {
		return nil, err
	}
	return p, nil
}

// path returns the file the dynamic loader picked for the library.
func (l *library) path() (string, error) {
	var msg *C.char
	p := C.druto_dlpath(l.h, &msg)
	if err := takeErr("dlinfo", l.name, msg); err != nil {
		return "", err
	}
	defer C.free(unsafe.Pointer(p))
	s := C.GoString(p)
	if s == "" {
		return "", errors.New("blas: dlinfo(" + l.name + "): empty path")
	}
	return s, nil
}

// close unloads the library.
func (l *library) close() error {
	var msg *C.char
	C.druto_dlclose(l.h, &msg)
	return takeErr("dlclose", l.name, msg)
}

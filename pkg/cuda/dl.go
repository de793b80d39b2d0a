//go:build cgo && linux

package cuda

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>

static void* dl_open(const char* name) { return dlopen(name, RTLD_LAZY | RTLD_LOCAL); }

static const char* dl_path(void* h) {
	struct link_map* lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL) return NULL;
	return lm->l_name;
}

static long dl_gettid(void) { return syscall(SYS_gettid); }
*/
import "C"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"unsafe"
)

// systemLoader opens libraries with dlopen.
var systemLoader Loader = dlLoader{}

// dlLoader is the dlopen Loader. dlerror's message is per thread, so each
// dlopen or dlsym and its dlerror run with the goroutine locked to its
// thread.
type dlLoader struct{}

// dlLibrary is a dlopen handle.
type dlLibrary struct {
	handle unsafe.Pointer
	path   string
}

func dlerror() string {
	if e := C.dlerror(); e != nil {
		return C.GoString(e)
	}
	return "unknown dlopen error"
}

// Open dlopens name (an absolute path or a bare soname).
func (dlLoader) Open(name string) (Library, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := C.dl_open(cname)
	if h == nil {
		msg := dlerror()
		if strings.Contains(msg, "No such file or directory") {
			return nil, fmt.Errorf("cuda: %s: %w", msg, fs.ErrNotExist)
		}
		return nil, errors.New(msg)
	}
	path := name
	if p := C.dl_path(h); p != nil && C.GoString(p) != "" {
		path = C.GoString(p)
	}
	return &dlLibrary{handle: h, path: path}, nil
}

// Sym returns the address of a function.
func (l *dlLibrary) Sym(name string) (unsafe.Pointer, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	C.dlerror() // clear
	p := C.dlsym(l.handle, cname)
	if p == nil {
		return nil, fmt.Errorf("%w: %s in %s: %s", ErrSymbol, name, l.path, dlerror())
	}
	return p, nil
}

// Path returns the file the loader opened.
func (l *dlLibrary) Path() string { return l.path }

// Close dlcloses the library.
func (l *dlLibrary) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.dlclose(l.handle) != 0 {
		return fmt.Errorf("cuda: dlclose %s: %s", l.path, dlerror())
	}
	return nil
}

// osThreadID returns the calling OS thread's id.
func osThreadID() int { return int(C.dl_gettid()) }

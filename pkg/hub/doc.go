// Package hub downloads model repositories from the Hugging Face Hub into
// the cache that huggingface_hub (and so transformers) uses, and finds them
// there again without a network.
//
// The cache is the one huggingface_hub keeps, file for file, so that a model
// transformers downloaded is used as it is and transformers reads what druto
// downloaded:
//
//	$HF_HUB_CACHE/models--ORG--NAME/
//	    blobs/<etag>                    the file's bytes, named by its sha256 (LFS) or git sha1
//	    snapshots/<commit>/<file>       a relative symlink to ../../blobs/<etag>
//	    refs/<revision>                 the commit a branch or tag pointed at when last pulled
//	$HF_HUB_CACHE/.locks/models--ORG--NAME/<etag>.lock
//
// The environment means what it means to huggingface_hub: HF_ENDPOINT (the
// Hub, https://huggingface.co by default), HF_TOKEN (or the token file that
// `huggingface-cli login` writes under HF_HOME), HF_HOME, HF_HUB_CACHE and
// HF_HUB_OFFLINE (1, true, yes or on: use the cache and never the network).
//
// A download is written to blobs/<etag>.incomplete, resumed with an HTTP
// Range request after a cut, checked against the hash the Hub announced (the
// sha256 of X-Linked-Etag for LFS files, the git blob sha1 of ETag for the
// others) and only then renamed into blobs/ and linked from the snapshot.
// A lock file per blob keeps two processes from writing the same blob.
//
// Security: the token goes only to the configured endpoint's host, never to
// a host it redirects to (the CDN; net/http alone would forward it to a
// subdomain or another port of the same host), and is never printed: Secret
// formats as "***". File names, commits and etags from the server are
// checked before anything is written (no absolute paths, no "..", no
// symlinked folder inside a snapshot). A body longer than the announced size
// is cut off and rejected. TLS verification is never turned off.
//
// What comes from libraries and what is written here: retries of a request
// that fails (connection refused, 429, 5xx, honouring Retry-After, with a
// cap) are github.com/hashicorp/go-retryablehttp's; the lock file is
// github.com/gofrs/flock's (flock on Unix, LockFileEx on Windows, as
// huggingface_hub's filelock); the progress bar is
// github.com/schollz/progressbar/v3's. Written by hand, because no Go
// module does them: the cache layout (it must match huggingface_hub's
// file for file, so that both read what the other wrote), resuming a body cut
// mid-transfer (a retrying client re-sends the same request and cannot
// know how much was kept), hash checks before a file becomes visible, and
// the checks on names a server chose.
package hub

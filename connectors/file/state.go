package file

import (
	"encoding/json"
	"fmt"
	"sort"
)

// stateVersion is the version of the source's state format.
const stateVersion = 1

// ident is a file's identity.
type ident struct{ Dev, Ino uint64 }

// fileState is what the source remembers of one file.
type fileState struct {
	Path string `json:"path"` // last path it was seen at (for people)
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
	// Offset is the byte after the last line sent.
	Offset int64 `json:"offset"`
	// FP is the XXH3-64 of the file's first FPLen bytes (FPLen is at most
	// fingerprintLen and at most Offset): the same inode with other first
	// bytes is another file.
	FP    uint64 `json:"fp,omitempty"`
	FPLen int64  `json:"fp_len,omitempty"`
	// Size and MTime (unix ns) of the version sent, in whole_file format.
	Size  int64 `json:"size,omitempty"`
	MTime int64 `json:"mtime,omitempty"`
}

func (f *fileState) ident() ident { return ident{f.Dev, f.Ino} }

// sourceState is the source's state, saved with each batch.
type sourceState struct {
	Version int         `json:"v"`
	Files   []fileState `json:"files"`
}

// encodeState writes the state of files, sorted by path.
func encodeState(files []fileState) ([]byte, error) {
	sort.Slice(files, func(i, j int) bool {
		if files[i].Path != files[j].Path {
			return files[i].Path < files[j].Path
		}
		return files[i].Ino < files[j].Ino
	})
	b, err := json.Marshal(sourceState{Version: stateVersion, Files: files})
	if err != nil {
		return nil, fmt.Errorf("file source: encode state: %w", err)
	}
	return b, nil
}

// decodeState reads a saved state; nil or empty data is no state.
func decodeState(data []byte) (map[ident]fileState, error) {
	out := map[ident]fileState{}
	if len(data) == 0 {
		return out, nil
	}
	var st sourceState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("file source: saved state is not valid: %w", err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("file source: saved state has version %d, this Ferry reads version %d", st.Version, stateVersion)
	}
	for i, f := range st.Files {
		if f.Offset < 0 || f.FPLen < 0 || f.FPLen > fingerprintLen || f.Size < 0 {
			return nil, fmt.Errorf("file source: saved state: file %d (%q) has a negative or impossible offset, size or fingerprint length", i, f.Path)
		}
		out[f.ident()] = f
	}
	return out, nil
}

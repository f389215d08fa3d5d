package api

import (
	"errors"
	"net/http"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/runtime"
)

// activityBody is GET /{kind}s/{key}/activity: what a running connector
// reports of its recent work (the exec sink's, hooks', last runs).
type activityBody struct {
	Key      string `json:"key"`
	Activity any    `json:"activity"`
}

// getActivity serves GET /{kind}s/{key}/activity (Ferry extension).
func (s *Server) getActivity(w http.ResponseWriter, r *http.Request, kind connector.Kind) error {
	key := r.PathValue("key")
	a, err := s.rt.Activity(kind, key)
	if errors.Is(err, runtime.ErrNoActivity) {
		return &APIError{Status: http.StatusNotFound, Code: codeNoActivity, Reason: err.Error(), Err: err}
	}
	if err != nil {
		return runtimeError(kind, key, err)
	}
	writeJSON(w, http.StatusOK, activityBody{Key: key, Activity: a})
	return nil
}

// codeNoActivity answers for a connector that reports no activity.
const codeNoActivity = "no_activity"

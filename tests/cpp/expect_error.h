#pragma once
// EXPECT_ERROR_WITH(stmt, "part", ...): `stmt` must throw ember::Error whose message contains
// every given part (user errors must name the problem).
#include <gtest/gtest.h>

#include <string>

#include "ember/support/error.h"

#define EXPECT_ERROR_WITH(stmt, ...)                                   \
  do {                                                                 \
    try {                                                              \
      stmt;                                                            \
      ADD_FAILURE() << "expected ember::Error from " #stmt;            \
    } catch (const ::ember::Error& e) {                                \
      for (const char* part : {__VA_ARGS__})                           \
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) \
            << "message '" << e.what() << "' lacks '" << part << "'";  \
    }                                                                  \
  } while (0)

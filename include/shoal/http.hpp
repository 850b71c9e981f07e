// shoal::http: an HTTP/1.1 server module on shoal::net (parser, response
// framing, the connection loop with keep-alive and graceful shutdown).
#pragma once
#include "shoal/http/parser.hpp"
#include "shoal/http/message.hpp"
#include "shoal/http/server.hpp"

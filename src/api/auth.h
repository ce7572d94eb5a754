// API keys and authentication. A key is "pdk_" + 48 random hex characters, shown once when it
// is minted; the registry stores only its SHA-256 (and an 8-character prefix for display), so a
// stolen database does not yield working keys.
#pragma once

#include <optional>
#include <string>

#include "api/http_message.h"
#include "common/clock.h"
#include "common/status.h"
#include "lifecycle/sandbox_manager.h"
#include "registry/store.h"

namespace paddock::api {

// SHA-256 of the key, lowercase hex.
std::string HashApiKey(std::string_view key);

// Creates a key for the tenant; returns the secret (the only time it exists in clear).
Result<std::string> MintApiKey(registry::Store& store, const std::string& tenant_id,
                               const std::string& role, const Clock& clock);

// On a registry with no keys yet: creates the "admin" tenant and an admin key and returns the
// secret (to be shown once); otherwise nullopt.
Result<std::optional<std::string>> BootstrapAdminKey(registry::Store& store, const Clock& clock);

// Authenticates "Authorization: Bearer <key>". A missing or unknown key is kPermissionDenied;
// the API answers it with 401 "unauthenticated".
Result<lifecycle::Principal> Authenticate(registry::Store& store, const Request& request);

}  // namespace paddock::api

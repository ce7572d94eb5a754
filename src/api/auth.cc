#include "api/auth.h"

#include "common/random.h"
#include "common/sha256.h"

namespace paddock::api {

std::string HashApiKey(std::string_view key) { return Sha256Hex(key); }

Result<std::string> MintApiKey(registry::Store& store, const std::string& tenant_id,
                               const std::string& role, const Clock& clock) {
  const std::string secret = "pdk_" + RandomHex(24);
  registry::ApiKeyRecord rec;
  rec.id = "key-" + RandomHex(8);
  rec.tenant_id = tenant_id;
  rec.key_hash = HashApiKey(secret);
  rec.key_prefix = secret.substr(0, 8);
  rec.role = role;
  rec.created_at = clock.NowMs();
  PADDOCK_RETURN_IF_ERROR(store.CreateApiKey(rec));
  return secret;
}

Result<std::optional<std::string>> BootstrapAdminKey(registry::Store& store, const Clock& clock) {
  PADDOCK_ASSIGN_OR_RETURN(int64_t keys, store.CountApiKeys());
  if (keys > 0) return std::optional<std::string>();
  registry::TenantRecord admin{"tenant-admin", "admin", clock.NowMs()};
  if (Status st = store.CreateTenant(admin); !st.ok() && st.code() != StatusCode::kAlreadyExists)
    return st;
  PADDOCK_ASSIGN_OR_RETURN(std::string secret, MintApiKey(store, admin.id, "admin", clock));
  return std::optional<std::string>(secret);
}

Result<lifecycle::Principal> Authenticate(registry::Store& store, const Request& request) {
  const std::string header = request.headers.Get("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0)
    return PermissionDenied("missing API key (Authorization: Bearer <key>)");
  auto key = store.FindApiKeyByHash(HashApiKey(std::string_view(header).substr(kBearer.size())));
  if (!key.ok()) return PermissionDenied("invalid API key");
  return lifecycle::Principal{key->tenant_id, key->role == "admin"};
}

}  // namespace paddock::api

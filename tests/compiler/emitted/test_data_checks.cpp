// The data table fvic emits for every acceptance model (backend/cpp/emit_data_checks.cpp) and the
// runtime's validation of a data directory against it (fvi/data/validate.h):
//   - every model's table lists its data declarations with their party and type, and valid random
//     data (unit/test_models.h), written as a data directory, passes;
//   - one bad-data case per kind of mistake (a missing variable, a wrong shape, a non-integer for
//     an int, a value outside its declared constraint, including a bound that is another data
//     value, NaN and inf, a variable in the wrong party's file) is rejected, and the message names
//     the file, the variable and the declaration as written in the model.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>

#include "fvi/data/validate.h"
#include "generated_models.h"
#include "runtime/data/data_test_util.h"

namespace {

using Catch::Matchers::Contains;
using fvic::test::ModelCase;
using nlohmann::json;

const fvi_model* model_named(const std::string& name) {
#define FVI_MODEL_ENTRY(n) \
  if (name == #n) return fvi_model_##n();
  FVI_MODELS(FVI_MODEL_ENTRY)
#undef FVI_MODEL_ENTRY
  return nullptr;
}

std::vector<std::string> model_names() {
#define FVI_MODEL_NAME(n) #n,
  return {FVI_MODELS(FVI_MODEL_NAME)};
#undef FVI_MODEL_NAME
}

// A value as Stan JSON: a number, a list, or a list of rows.
json to_json(const fvic::ir::RealTensor& t, size_t rank) {
  if (rank == 0) return t.m(0, 0);
  json out = json::array();
  if (rank == 1) {
    for (Eigen::Index i = 0; i < t.m.size(); ++i) out.push_back(t.m.data()[i]);
    return out;
  }
  for (Eigen::Index i = 0; i < t.m.rows(); ++i) {
    json row = json::array();
    for (Eigen::Index j = 0; j < t.m.cols(); ++j) row.push_back(t.m(i, j));
    out.push_back(row);
  }
  return out;
}

// A data directory with valid random data for `name`: data.json, server.json, and two silos
// holding the same silo / split data. Tests change one file and validate.
struct DataDir {
  explicit DataDir(const std::string& model_name) : name(model_name), loaded(model_name, 11, 1) {
    const fvic::SemanticModel& m = *loaded.loaded.model;
    for (const fvic::Symbol& s : m.symbols) {
      if (s.kind != fvic::SymbolKind::Data) continue;
      json& party = s.owner == fvic::Owner::Public ? pub : s.owner == fvic::Owner::Server ? server : silo[0];
      party[s.name] = to_json(loaded.bindings.data.at(s.name), s.shape.dims.size());
    }
    silo[1] = silo[0];
    write();
  }
  void write() const {
    dir.write("data.json", pub.dump());
    dir.write("server.json", server.dump());
    dir.write("silo-1.json", silo[0].dump());
    dir.write("silo-2.json", silo[1].dump());
  }
  fvi::data::Problems validate(bool write_files = true) {
    if (write_files) write();
    fvi::data::DataDirectory d = fvi::data::load_data_directory(dir.str());
    return fvi::data::validate(*model_named(name)->data_table, d);
  }
  std::string problems() { return validate().text(); }
  double value(const std::string& v) const {
    for (const json* j : {&pub, &server, &silo[0]})
      if (j->contains(v)) return (*j)[v].get<double>();
    FAIL("no data value " << v);
    return 0;
  }
  // "declared in the `silo data` block at line 9", from the checked model.
  std::string declared(const std::string& v) const {
    const fvic::Symbol* s = loaded.loaded.model->find(v);
    REQUIRE(s);
    const char* block = s->owner == fvic::Owner::Public   ? "data"
                        : s->owner == fvic::Owner::Server ? "server data"
                        : s->owner == fvic::Owner::Silo   ? "silo data"
                                                          : "split data";
    return std::string("declared in the `") + block + "` block at line " + std::to_string(s->decl->loc.line);
  }

  std::string name;
  ModelCase loaded;
  fvi_test::TempDir dir;
  json pub = json::object(), server = json::object();
  json silo[2] = {json::object(), json::object()};
};

}  // namespace

TEST_CASE("every acceptance model's data table lists its data declarations", "[data][emitted]") {
  for (const std::string& name : model_names()) {
    INFO(name);
    const fvi_model* m = model_named(name);
    REQUIRE(m->data_table);
    const fvi_data_table& t = *m->data_table;
    ModelCase c(name, 1, 1);
    std::vector<const fvic::Symbol*> data;
    for (const fvic::Symbol& s : c.loaded.model->symbols)
      if (s.kind == fvic::SymbolKind::Data) data.push_back(&s);
    REQUIRE(t.declaration_count == int(data.size()));
    for (size_t i = 0; i < data.size(); ++i) {
      const fvi_data_declaration& d = t.declarations[i];
      CHECK(d.name == data[i]->name);
      CHECK(d.is_int == (data[i]->type.base == fvic::Base::Int));
      CHECK(d.rank == int(data[i]->shape.dims.size()));
      CHECK(d.line == data[i]->decl->loc.line);
      const int party = data[i]->owner == fvic::Owner::Public   ? FVI_DATA_PUBLIC
                        : data[i]->owner == fvic::Owner::Server ? FVI_DATA_SERVER
                        : data[i]->owner == fvic::Owner::Silo   ? FVI_DATA_SILO
                                                                : FVI_DATA_SPLIT;
      CHECK(d.party == party);
      for (int k = 0; k < d.rank; ++k) CHECK(std::string(d.dims[k]) == data[i]->shape.dims[k].str());
    }
  }
}

TEST_CASE("valid data passes for every acceptance model, laid out as the kernels bind it", "[data][emitted]") {
  for (const std::string& name : model_names()) {
    INFO(name);
    DataDir d(name);
    fvi::data::DataDirectory dir = fvi::data::load_data_directory(d.dir.str());
    const fvi::data::Problems p = fvi::data::validate(*model_named(name)->data_table, dir);
    CHECK(p.text() == "");
    // Every factor of the model binds the validated data of the party that evaluates it.
    const fvi_model* m = model_named(name);
    const fvi::data::DataSet server = std::move(dir.server).merged(dir.public_data);
    const fvi::data::DataSet silo = std::move(dir.silos[0]).merged(dir.public_data);
    for (int f = 0; f < m->factor_count; ++f) {
      const bool on_server = m->factors[f].owner == FVI_SERVER || m->factors[f].owner == FVI_COUPLING;
      fvi_error error{};
      void* state = m->create(f, on_server ? &server.view() : &silo.view(), &error);
      CHECK(std::string(error.message) == "");
      if (state) m->destroy(state);
    }
  }
}

TEST_CASE("hier_logreg: one message per kind of mistake, naming file, variable and declaration", "[data][emitted]") {
  DataDir d("hier_logreg");
  const std::string silo2 = d.dir / "silo-2.json";
  const int N = int(d.value("N")), D = int(d.value("D"));
  const std::string y_decl = "(array[N] int<lower=0, upper=1> y)";

  SECTION("a missing variable") {
    d.silo[1].erase("y");
    CHECK_THAT(d.problems(), Contains(silo2 + ": y is missing (array[N] int<lower=0, upper=1> y, " + d.declared("y") + ")"));
  }
  SECTION("a wrong shape") {
    for (json& row : d.silo[1]["x"]) row.push_back(0.5);
    CHECK_THAT(d.problems(), Contains(silo2 + ": x is of shape [" + std::to_string(N) + ", " + std::to_string(D + 1) +
                                      "], but matrix[N, D] x is of shape [N, D] = [" + std::to_string(N) + ", " +
                                      std::to_string(D) + "]"));
  }
  SECTION("a vector where a matrix is declared") {
    d.silo[1]["x"] = json::array({1, 2, 3});
    CHECK_THAT(d.problems(), Contains(silo2 + ": x is of shape [3], but matrix[N, D] x is of shape [N, D]"));
  }
  SECTION("a non-integer for an int") {
    d.silo[1]["y"][1] = 0.5;
    CHECK_THAT(d.problems(), Contains(silo2 + ": y[2] = 0.5 is not an integer " + y_decl));
  }
  SECTION("a value outside its declared bounds") {
    d.silo[1]["y"][2] = 3;
    CHECK_THAT(d.problems(), Contains(silo2 + ": y[3] = 3 is outside its declared bounds [0, 1] " + y_decl));
  }
  SECTION("a size below its lower bound") {
    d.pub["D"] = 0;
    CHECK_THAT(d.problems(), Contains((d.dir / "data.json") + ": D = 0 is below its declared lower bound 1 (int<lower=1> D)"));
  }
  SECTION("NaN and inf") {
    d.silo[1]["x"][0][1] = "NaN";
    d.silo[0]["x"][1][0] = "-Inf";
    const std::string p = d.problems();
    CHECK_THAT(p, Contains(silo2 + ": x[1, 2] is NaN; data must be finite (matrix[N, D] x)"));
    CHECK_THAT(p, Contains((d.dir / "silo-1.json") + ": x[2, 1] is -inf; data must be finite (matrix[N, D] x)"));
  }
  SECTION("public data in a silo's file") {
    d.silo[1]["D"] = D;
    CHECK_THAT(d.problems(), Contains(silo2 + ": D is declared in the `data` block (line " +
                                      std::to_string(d.loaded.loaded.model->find("D")->decl->loc.line) +
                                      "): give it in data.json, not here"));
  }
  SECTION("every mistake at once") {
    d.silo[1].erase("N");
    d.silo[1]["y"][0] = -1;
    d.silo[0]["y"][0] = 0.5;
    d.silo[0]["x"][0][0] = "Inf";
    const fvi::data::Problems p = d.validate();
    INFO(p.text());
    CHECK(p.total == 4);
    CHECK_THAT(p.text(), Contains(silo2 + ": N is missing"));
    CHECK_THAT(p.text(), Contains(silo2 + ": y[1] = -1 is outside its declared bounds [0, 1]"));
    CHECK_THAT(p.text(), Contains((d.dir / "silo-1.json") + ": y[1] = 0.5 is not an integer"));
    CHECK_THAT(p.text(), Contains((d.dir / "silo-1.json") + ": x[1, 1] is inf"));
  }
}

TEST_CASE("bnn_classifier: a bound that is another data value", "[data][emitted]") {
  DataDir d("bnn_classifier");
  const int K = int(d.value("K"));
  d.silo[1]["y"][0] = K + 1;
  CHECK_THAT(d.problems(), Contains((d.dir / "silo-2.json") + ": y[1] = " + std::to_string(K + 1) +
                                    " is outside its declared bounds [1, K = " + std::to_string(K) +
                                    "] (array[N] int<lower=1, upper=K> y)"));
  d.silo[1]["y"][0] = 1;
  d.pub["K"] = 1;
  const std::string p = d.problems();
  CHECK_THAT(p, Contains((d.dir / "data.json") + ": K = 1 is below its declared lower bound 2 (int<lower=2> K)"));
}

TEST_CASE("vfl_poisson_multilevel: server data, public arrays and split data", "[data][emitted]") {
  DataDir d("vfl_poisson_multilevel");
  const int N = int(d.value("N")), R = int(d.value("R"));
  d.server["y"][1] = -2;
  d.pub["level"][0] = R + 1;
  d.silo[0]["x"].erase(0);
  d.silo[1].erase("P");
  const std::string p = d.problems();
  CHECK_THAT(p, Contains((d.dir / "server.json") + ": y[2] = -2 is below its declared lower bound 0 (array[N] int<lower=0> y)"));
  CHECK_THAT(p, Contains((d.dir / "data.json") + ": level[1] = " + std::to_string(R + 1) +
                         " is outside its declared bounds [1, R = " + std::to_string(R) + "]"));
  CHECK_THAT(p, Contains((d.dir / "silo-1.json") + ": x is of shape [" + std::to_string(N - 1) + ", "));
  CHECK_THAT(p, Contains((d.dir / "silo-2.json") + ": P is missing (int<lower=1> P, " + d.declared("P") + ")"));
  d.write();
  std::filesystem::remove(d.dir / "server.json");
  CHECK_THAT(d.validate(false).text(), Contains((d.dir / "server.json") + " (not found): y is missing"));
}

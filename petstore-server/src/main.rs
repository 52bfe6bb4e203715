//! `petstore-server`: parses its arguments and runs the command they
//! name ([`petstore_server::cli::main`]).

fn main() -> std::process::ExitCode {
    petstore_server::cli::main()
}

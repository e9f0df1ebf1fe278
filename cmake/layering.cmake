# Writes <build>/layering/targets.json: every target of the build, with its folder, kind,
# sources (header sets included) and the targets it links. tests/layering/check_layers.py
# derives the layering rules from it (each folder is one library; a file may include only
# headers of its own target and of what that target links), so the rules live in the CMake
# files that define the libraries, not in a hand-kept list.
function(tinymlir_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    tinymlir_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(tinymlir_write_layering_targets)
  tinymlir_targets_below(${PROJECT_SOURCE_DIR} targets)
  set(entries "")
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    set(q "\"")
    if(type STREQUAL "INTERFACE_LIBRARY")
      set(sources "$<TARGET_PROPERTY:${t},INTERFACE_SOURCES>;$<TARGET_PROPERTY:${t},HEADER_SET>")
      set(links "$<TARGET_PROPERTY:${t},INTERFACE_LINK_LIBRARIES>")
    else()
      set(sources "$<TARGET_PROPERTY:${t},SOURCES>")
      set(links "$<TARGET_PROPERTY:${t},LINK_LIBRARIES>")
    endif()
    get_target_property(extra ${t} TINYMLIR_MAY_INCLUDE)
    if(NOT extra)
      set(extra "")
    endif()
    string(APPEND entries
      "{\"name\": \"${t}\", \"type\": \"${type}\", \"dir\": \"${dir}\",\n"
      " \"sources\": [\"$<JOIN:$<FILTER:${sources},EXCLUDE,^$>,\", \">\"],\n"
      " \"links\": [\"$<JOIN:$<FILTER:${links},EXCLUDE,^$>,\", \">\"],\n"
      " \"interface_links\": [\"$<JOIN:$<FILTER:$<TARGET_PROPERTY:${t},INTERFACE_LINK_LIBRARIES>,EXCLUDE,^$>,\", \">\"],\n"
      " \"may_include\": [\"$<JOIN:${extra},\", \">\"]},\n")
  endforeach()
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/layering/targets.json
    CONTENT "{\"source_dir\": \"${PROJECT_SOURCE_DIR}\", \"binary_dir\": \"${PROJECT_BINARY_DIR}\",\n\"targets\": [\n${entries}{}]}\n")
endfunction()
